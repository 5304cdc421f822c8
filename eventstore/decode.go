package eventstore

import (
	"fmt"

	"github.com/serpent-engine/serpent/events"
)

// DecodeMessage reads the events stored at seq on jobID's subject: one,
// or the group of an append written as one message (events.DecodeAll).
// Anything that does not decode strictly, or that disagrees with where it
// was found (another job, another id or types in the headers), is a
// *CorruptError naming the job and the sequence. It never panics.
func DecodeMessage(jobID string, seq uint64, header map[string][]string, data []byte) ([]events.Event, error) {
	evs, err := events.DecodeAll(data)
	if err != nil {
		return nil, &CorruptError{JobID: jobID, Seq: seq, Err: err}
	}
	if err := CheckStored(jobID, header, evs); err != nil {
		return nil, &CorruptError{JobID: jobID, Seq: seq, Err: err}
	}
	return evs, nil
}

// CheckStored checks the events of one message (at least one) against
// where and how it is stored: every event is jobID's (unless jobID is
// empty: a recorded log without subjects), the message id is the first
// event's, and the type header names the events' types
// (events.TypeHeader). Absent headers are not checked.
func CheckStored(jobID string, header map[string][]string, evs []events.Event) error {
	e := evs[0]
	if jobID != "" && e.JobID != jobID {
		return fmt.Errorf("event %s belongs to job %q", e.ID, e.JobID)
	}
	if v := first(header, HeaderMsgID); v != "" && v != e.ID {
		return fmt.Errorf("event id %s is stored under message id %q", e.ID, v)
	}
	if v := first(header, events.HeaderType); v != "" && v != events.TypeHeader(evs) {
		if len(evs) == 1 {
			return fmt.Errorf("%s event %s is stored with type header %q", e.Type(), e.ID, v)
		}
		return fmt.Errorf("a group of %s events from %s is stored with type header %q", events.TypeHeader(evs), e.ID, v)
	}
	return nil
}

func first(h map[string][]string, k string) string {
	if vs := h[k]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}
