package nats

import (
	"fmt"
	"strings"

	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/projections"
)

// DecodeEvents reads the events of a message strictly
// (projections.DecodeAll, as events.DecodeAll) and checks they belong
// where they are stored: the job its subject names, under the first
// one's message id and their types' header (store.CheckStored). A message
// holds one event, or the group of an append written as one message; the
// records of a group share the message's sequence. Without a subject (a
// recorded log) only the events are read. light leaves results out
// (projections.DecodeLight). Errors are *eventstore.CorruptError. prefix is
// what comes before the job id in the subject (for SERP_EVENTS,
// EventSubjectPrefix). The projection runner, the tally's fold and the
// audit all read the log with it, so they agree on what is an event.
func DecodeEvents(prefix string, m Message, light bool) ([]projections.Record, error) {
	jobID := strings.TrimPrefix(m.Subject, prefix)
	evs, err := projections.DecodeAll(m.Data, light)
	if err != nil {
		return nil, &eventstore.CorruptError{JobID: jobID, Seq: m.Seq, Err: err}
	}
	if e := evs[0]; m.Subject != "" && e.JobID != jobID {
		err = fmt.Errorf("event %s of job %s is stored on %s", e.ID, e.JobID, m.Subject)
	} else {
		err = eventstore.CheckStored("", m.Header, evs)
	}
	if err != nil {
		return nil, &eventstore.CorruptError{JobID: jobID, Seq: m.Seq, Err: err}
	}
	recs := make([]projections.Record, len(evs))
	for i, e := range evs {
		recs[i] = projections.Record{Seq: m.Seq, Event: e}
	}
	return recs, nil
}
