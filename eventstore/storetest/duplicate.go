package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// testDuplicateID pins down what an event id already in the log gets
// when it is not a retry of the same append.
func testDuplicateID(t *testing.T, s Store) {
	ctx := context.Background()
	other := NewJobID()
	otherEvs := NewEvents(other, 1, 1)
	_, err := s.Append(ctx, other, 0, otherEvs...)
	require.NoError(t, err)

	tests := []struct {
		name string
		// evs builds the append at the job's version from its history.
		evs func(job string, history []events.Event) []events.Event
		// stale appends at version 0 instead of the job's version.
		stale bool
		is    error
	}{
		{"earlier event of the job again", func(job string, h []events.Event) []events.Event {
			e := NewEvent(job, 3)
			e.ID = h[0].ID
			return []events.Event{e}
		}, false, eventstore.ErrDuplicate},
		{"event id of another job", func(job string, h []events.Event) []events.Event {
			e := NewEvent(job, 3)
			e.ID = otherEvs[0].ID
			return []events.Event{e}
		}, false, eventstore.ErrDuplicate},
		// An append of several events is one message, whose id is its
		// first event's: a retried append is known by it.
		{"known id first in an append of two", func(job string, h []events.Event) []events.Event {
			evs := NewEvents(job, 3, 2)
			evs[0].ID = h[0].ID
			return evs
		}, false, eventstore.ErrDuplicate},
		{"known id with a stale version is a conflict", func(job string, h []events.Event) []events.Event {
			e := NewEvent(job, 1)
			e.ID = otherEvs[0].ID
			return []events.Event{e}
		}, true, eventstore.ErrConcurrency},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := NewJobID()
			history := NewEvents(job, 1, 2)
			v, err := s.Append(ctx, job, 0, history...)
			require.NoError(t, err)
			expected := v
			if tt.stale {
				expected = 0
			}
			_, err = s.Append(ctx, job, expected, tt.evs(job, history)...)
			require.ErrorIs(t, err, tt.is)
			requireJob(t, s, job, history, v)
		})
	}
}
