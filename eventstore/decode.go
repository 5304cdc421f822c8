package eventstore

import (
	"fmt"

	"github.com/serpent-engine/serpent/events"
)

// DecodeMessage reads the events stored at seq on jobID's subject
// (events.DecodeMessage). Anything that does not decode strictly, or that
// disagrees with where it was found (another job, another id or types in
// the header), is a *CorruptError naming the job and the sequence. It
// never panics.
func DecodeMessage(jobID string, seq uint64, header map[string][]string, data []byte) ([]events.Event, error) {
	evs, err := events.DecodeMessage(header, data)
	if err == nil && evs[0].JobID != jobID {
		err = fmt.Errorf("event %s belongs to job %q", evs[0].ID, evs[0].JobID)
	}
	if err != nil {
		return nil, &CorruptError{JobID: jobID, Seq: seq, Err: err}
	}
	return evs, nil
}
