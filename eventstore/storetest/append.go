package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

func testAppendAndLoad(t *testing.T, s Store) {
	ctx := context.Background()
	job := NewJobID()
	first := NewEvents(job, 1, 1)
	v1, err := s.Append(ctx, job, 0, first...)
	require.NoError(t, err)
	require.NotZero(t, v1)
	requireJob(t, s, job, first, v1)

	next := NewEvents(job, 2, 2)
	v2, err := s.Append(ctx, job, v1, next...)
	require.NoError(t, err)
	require.Equal(t, v1+1, v2, "the events of one append are one message")
	requireJob(t, s, job, concat(first, next), v2)

	// Another job moves the shared sequence on; this job's version stays.
	other := NewJobID()
	_, err = s.Append(ctx, other, 0, NewEvents(other, 1, 3)...)
	require.NoError(t, err)
	requireJob(t, s, job, concat(first, next), v2)

	last := NewEvents(job, 4, 1)
	v3, err := s.Append(ctx, job, v2, last...)
	require.NoError(t, err)
	require.Greater(t, v3, v2+1, "versions are log sequences, shared by all jobs")
	requireJob(t, s, job, concat(first, next, last), v3)
}

func testEmptyJob(t *testing.T, s Store) {
	evs, v, err := s.Load(context.Background(), NewJobID())
	require.NoError(t, err)
	require.Nil(t, evs)
	require.Zero(t, v)
}

func testWrongExpectedVersion(t *testing.T, s Store) {
	ctx := context.Background()
	job := NewJobID()
	first := NewEvents(job, 1, 1)
	v1, err := s.Append(ctx, job, 0, first...)
	require.NoError(t, err)

	tests := []struct {
		name     string
		expected uint64
	}{
		{"zero on an existing job", 0},
		{"ahead of the job", v1 + 100},
		{"just before the job", v1 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Append(ctx, job, tt.expected, NewEvents(job, 2, 2)...)
			require.ErrorIs(t, err, eventstore.ErrConcurrency)
			require.ErrorContains(t, err, job)
			requireJob(t, s, job, first, v1)
		})
	}

	t.Run("non-zero on a new job", func(t *testing.T) {
		fresh := NewJobID()
		_, err := s.Append(ctx, fresh, v1, NewEvents(fresh, 1, 1)...)
		require.ErrorIs(t, err, eventstore.ErrConcurrency)
		requireJob(t, s, fresh, nil, 0)
	})
}

func testRetryIsIdempotent(t *testing.T, s Store) {
	ctx := context.Background()
	tests := []struct {
		name string
		n    int
	}{
		{"one event", 1},
		{"three events", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := NewJobID()
			head := NewEvents(job, 1, 1)
			v0, err := s.Append(ctx, job, 0, head...)
			require.NoError(t, err)

			evs := NewEvents(job, 2, tt.n)
			v, err := s.Append(ctx, job, v0, evs...)
			require.NoError(t, err)
			again, err := s.Append(ctx, job, v0, evs...)
			require.NoError(t, err, "a retried append that landed succeeds")
			require.Equal(t, v, again)
			requireJob(t, s, job, concat(head, evs), v)

			// Still recognised after the job moved on.
			more := NewEvents(job, uint64(2+tt.n), 1)
			v2, err := s.Append(ctx, job, v, more...)
			require.NoError(t, err)
			again, err = s.Append(ctx, job, v0, evs...)
			require.NoError(t, err)
			require.Equal(t, v, again, "the retry returns the version its own append produced")
			requireJob(t, s, job, concat(head, evs, more), v2)

			if tt.n > 1 {
				// The rule is "the messages right after the expected
				// version hold these events": part of an append written
				// as one message is not a retry of it.
				_, err := s.Append(ctx, job, v0, evs[:tt.n-1]...)
				require.ErrorIs(t, err, eventstore.ErrConcurrency)
			}
			// Other events at that place are a conflict, not a retry.
			_, err = s.Append(ctx, job, v0, more...)
			require.ErrorIs(t, err, eventstore.ErrConcurrency)
		})
	}
}

func testAtomic(t *testing.T, s Store) {
	ctx := context.Background()
	tests := []struct {
		name   string
		mutate func(job string, evs []events.Event) []events.Event
		is     error
	}{
		{"last event of another job", func(job string, evs []events.Event) []events.Event {
			evs[2].JobID = NewJobID()
			return evs
		}, eventstore.ErrInvalid},
		{"middle event malformed", func(job string, evs []events.Event) []events.Event {
			evs[1].Data = nil
			return evs
		}, eventstore.ErrInvalid},
		{"last event too large", func(job string, evs []events.Event) []events.Event {
			evs[2] = padded(job, evs[2].Version, 2<<20)
			return evs
		}, eventstore.ErrTooLarge},
		{"duplicate id inside", func(job string, evs []events.Event) []events.Event {
			evs[2].ID = evs[0].ID
			return evs
		}, eventstore.ErrDuplicate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := NewJobID()
			head := NewEvents(job, 1, 1)
			v, err := s.Append(ctx, job, 0, head...)
			require.NoError(t, err)
			_, err = s.Append(ctx, job, v, tt.mutate(job, NewEvents(job, 2, 3))...)
			require.ErrorIs(t, err, tt.is)
			requireJob(t, s, job, head, v)
		})
	}

	t.Run("conflict writes none of the events", func(t *testing.T) {
		job := NewJobID()
		head := NewEvents(job, 1, 1)
		v, err := s.Append(ctx, job, 0, head...)
		require.NoError(t, err)
		_, err = s.Append(ctx, job, 0, NewEvents(job, 1, 3)...)
		require.ErrorIs(t, err, eventstore.ErrConcurrency)
		requireJob(t, s, job, head, v)
	})
}

func testInvalid(t *testing.T, s Store) {
	ctx := context.Background()
	job := NewJobID()
	tests := []struct {
		name string
		job  string
		evs  []events.Event
	}{
		{"no events", job, nil},
		{"event of another job", job, NewEvents(NewJobID(), 1, 1)},
		{"bad job id", "Job.1", NewEvents(job, 1, 1)},
		{"versions with a gap", job, []events.Event{NewEvent(job, 1), NewEvent(job, 3)}},
		{"versions going back", job, []events.Event{NewEvent(job, 2), NewEvent(job, 1)}},
		{"bad event id", job, func() []events.Event { e := NewEvent(job, 1); e.ID = "nope"; return []events.Event{e} }()},
		{"no time", job, func() []events.Event { e := NewEvent(job, 1); e.Time = time.Time{}; return []events.Event{e} }()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.Append(ctx, tt.job, 0, tt.evs...)
			require.ErrorIs(t, err, eventstore.ErrInvalid)
			require.False(t, errors.Is(err, eventstore.ErrConcurrency))
			requireJob(t, s, job, nil, 0)
		})
	}
}

func testCanceled(t *testing.T, s Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	job := NewJobID()
	_, err := s.Append(ctx, job, 0, NewEvents(job, 1, 1)...)
	require.ErrorIs(t, err, context.Canceled)
	requireJob(t, s, job, nil, 0)
}
