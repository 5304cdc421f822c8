package store

import (
	"fmt"

	"github.com/serpent-engine/serpent/events"
)

// DecodeMessage reads the event stored at seq on jobID's subject. Anything
// that does not decode strictly, or that disagrees with where it was found
// (another job, another id or type in the headers), is a *CorruptError
// naming the job and the sequence. It never panics.
func DecodeMessage(jobID string, seq uint64, header map[string][]string, data []byte) (events.Event, error) {
	e, err := events.Decode(data)
	if err != nil {
		return events.Event{}, &CorruptError{JobID: jobID, Seq: seq, Err: err}
	}
	if e.JobID != jobID {
		return events.Event{}, &CorruptError{JobID: jobID, Seq: seq, Err: fmt.Errorf("event %s belongs to job %q", e.ID, e.JobID)}
	}
	if v := first(header, HeaderMsgID); v != "" && v != e.ID {
		return events.Event{}, &CorruptError{JobID: jobID, Seq: seq, Err: fmt.Errorf("event id %s is stored under message id %q", e.ID, v)}
	}
	if v := first(header, events.HeaderType); v != "" && v != e.Type() {
		return events.Event{}, &CorruptError{JobID: jobID, Seq: seq, Err: fmt.Errorf("%s event %s is stored with type header %q", e.Type(), e.ID, v)}
	}
	return e, nil
}

func first(h map[string][]string, k string) string {
	if vs := h[k]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}
