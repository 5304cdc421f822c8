package memstore

import (
	"cmp"
	"context"
	"slices"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// Load returns the job's events in order and its version; (nil, 0, nil)
// for a job without events or one leaving the log (eventstore.Gone). An event that does not decode is a
// *eventstore.CorruptError naming the job and the sequence.
func (s *Store) Load(ctx context.Context, jobID string) ([]events.Event, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	job := append([]stored(nil), s.live(jobID)...)
	s.mu.Unlock()
	if len(job) == 0 {
		return nil, 0, nil
	}
	evs := make([]events.Event, 0, len(job))
	for _, m := range job {
		got, err := eventstore.DecodeMessage(jobID, m.seq, m.msg.Header, m.msg.Data)
		if err != nil {
			return nil, 0, err
		}
		evs = append(evs, got...)
	}
	if eventstore.Gone(evs) {
		return nil, 0, nil // the job is leaving the log: its head expired
	}
	return evs, job[len(job)-1].seq, nil
}

// History returns every event ever appended to the job, in order, those
// that left the log by their TTL included: what SERP_ARCHIVE keeps of a
// job. Simulations check their promises against it.
func (s *Store) History(ctx context.Context, jobID string) ([]events.Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	job := append(append([]stored(nil), s.archived[jobID]...), s.jobs[jobID]...)
	s.mu.Unlock()
	slices.SortFunc(job, func(a, b stored) int { return cmp.Compare(a.seq, b.seq) })
	var evs []events.Event
	for _, m := range job {
		got, err := eventstore.DecodeMessage(jobID, m.seq, m.msg.Header, m.msg.Data)
		if err != nil {
			return nil, err
		}
		evs = append(evs, got...)
	}
	return evs, nil
}
