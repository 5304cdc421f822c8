package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// Store is the event log as the engine uses it (engine.Store).
type Store interface {
	Append(ctx context.Context, jobID string, expected uint64, evs ...events.Event) (uint64, error)
	Load(ctx context.Context, jobID string) ([]events.Event, uint64, error)
}

// TimeAppends returns inner with every Append timed into
// serpent_append_seconds: result "ok", "conflict" (the job moved on:
// eventstore.ErrConcurrency) or "error".
func (m *Metrics) TimeAppends(inner Store) Store { return &timedStore{Store: inner, m: m} }

type timedStore struct {
	Store
	m *Metrics
}

// LeaderVersion passes eventstore.LeaderVersion through to the inner store.
func (s *timedStore) LeaderVersion(ctx context.Context, jobID string) (uint64, error) {
	return eventstore.LeaderVersion(ctx, s.Store, jobID)
}

func (s *timedStore) Append(ctx context.Context, jobID string, expected uint64, evs ...events.Event) (uint64, error) {
	start := time.Now()
	v, err := s.Store.Append(ctx, jobID, expected, evs...)
	result := "ok"
	switch {
	case errors.Is(err, eventstore.ErrConcurrency):
		result = "conflict"
	case err != nil:
		result = "error"
	}
	s.m.appends.WithLabelValues(result).Observe(time.Since(start).Seconds())
	return v, err
}
