package projections

import (
	"encoding/json"
	"time"

	"github.com/serpent-engine/serpent/events"
)

// Observation is what serp_observations holds under a job id: the bought
// search result, as the API returned it, with where it came from.
type Observation struct {
	JobID     string `json:"job_id"`
	Key       string `json:"key"`
	RequestID string `json:"request_id"`
	// Replayed is set when the result arrived as a replay of the key's
	// first execution (Idempotent-Replayed: true).
	Replayed bool      `json:"replayed"`
	Pages    int       `json:"pages"`
	StoredAt time.Time `json:"stored_at"`
	// Version is the job's version that stored it.
	Version uint64          `json:"version"`
	Result  json.RawMessage `json:"result"`
	Seq     uint64          `json:"seq"`
}

func (o *Observation) lastSeq() uint64 { return o.Seq }

func (o *Observation) apply(r Record) {
	d, ok := r.Event.Data.(events.ObservationStored)
	if !ok {
		return
	}
	*o = Observation{JobID: r.Event.JobID, Key: d.Key, RequestID: d.RequestID, Replayed: d.Replayed,
		Pages: d.Pages, StoredAt: r.Event.Time, Version: r.Event.Version, Result: d.Result, Seq: r.Seq}
}
