package nats

import (
	"fmt"
	"strings"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/projections"
)

// DecodeEvents reads the events of a message strictly and checks they
// belong where they are stored: the job its subject names, and its header
// (events.DecodeMessage). A message holds one event, or the group of an
// append written as one message; the records of a group share the
// message's sequence. Without a subject (a recorded log) only the events
// and the header are read. light leaves results out
// (events.DecodeMessageLight). Errors are *eventstore.CorruptError. prefix
// is what comes before the job id in the subject (for SERP_EVENTS,
// EventSubjectPrefix). The projection runner, the tally's fold and the
// audit all read the log with it, so they agree on what is an event.
func DecodeEvents(prefix string, m Message, light bool) ([]projections.Record, error) {
	jobID := strings.TrimPrefix(m.Subject, prefix)
	decode := events.DecodeMessage
	if light {
		decode = events.DecodeMessageLight
	}
	evs, err := decode(m.Header, m.Data)
	if err == nil && m.Subject != "" && evs[0].JobID != jobID {
		err = fmt.Errorf("event %s of job %s is stored on %s", evs[0].ID, evs[0].JobID, m.Subject)
	}
	if err != nil {
		return nil, &eventstore.CorruptError{JobID: jobID, Seq: m.Seq, Err: err}
	}
	recs := make([]projections.Record, len(evs))
	exp := eventstore.ExpiryOf(m.Header, m.Time, evs[0].Version == 1)
	for i, e := range evs {
		recs[i] = projections.Record{Seq: m.Seq, Event: e, Expires: exp}
	}
	return recs, nil
}
