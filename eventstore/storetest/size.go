package storetest

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// testSizeLimit writes messages exactly at the store's limit, headers and
// batch headers included, and one byte over it.
func testSizeLimit(t *testing.T, s Store) {
	sized, ok := s.(Sized)
	require.True(t, ok, "the store must implement storetest.Sized")
	limit := sized.MaxMessageSize()
	ctx := context.Background()

	tests := []struct {
		name string
		n    int // events in the append
		big  int // which one is at the limit
	}{
		{"single event", 1, 0},
		{"first of an atomic batch", 3, 0},
		{"last of an atomic batch", 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			over := NewJobID()
			evs := sizedAppend(t, over, tt.n, tt.big, limit+1)
			_, err := s.Append(ctx, over, 0, evs...)
			require.ErrorIs(t, err, eventstore.ErrTooLarge)
			for _, m := range []string{over, events.TypeObservationStored, strconv.Itoa(limit + 1), strconv.Itoa(limit)} {
				require.ErrorContains(t, err, m)
			}
			requireJob(t, s, over, nil, 0)

			at := NewJobID()
			evs = sizedAppend(t, at, tt.n, tt.big, limit)
			v, err := s.Append(ctx, at, 0, evs...)
			require.NoError(t, err, "a message exactly at the limit is accepted")
			requireJob(t, s, at, evs, v)
		})
	}
}

// testGroupLimit: an append of several events is one message when that
// message fits the limit, and one message per event, as an atomic batch,
// when it does not; it reads back the same either way.
func testGroupLimit(t *testing.T, s Store) {
	limit := s.(Sized).MaxMessageSize()
	ctx := context.Background()
	for _, tt := range []struct {
		name     string
		size     int    // of the append as one message
		messages uint64 // the log takes
	}{
		{"at the limit: one message", limit, 1},
		{"a byte over: a batch", limit + 1, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			job := NewJobID()
			head := NewEvents(job, 1, 1)
			v0, err := s.Append(ctx, job, 0, head...)
			require.NoError(t, err)
			evs := NewEvents(job, 2, 3)
			id := evs[2].ID
			measure := func(pad int) int {
				evs[2] = padded(job, 4, pad)
				evs[2].ID = id
				msgs, err := eventstore.EncodeAppend(job, v0, evs)
				require.NoError(t, err)
				return eventstore.Pack(msgs, math.MaxInt)[0].Size()
			}
			base := measure(0)
			require.Equal(t, tt.size, measure(tt.size-base))
			v, err := s.Append(ctx, job, v0, evs...)
			require.NoError(t, err)
			require.Equal(t, v0+tt.messages, v)
			requireJob(t, s, job, concat(head, evs), v)
		})
	}
}

// sizedAppend builds n events of a new job, event big of which takes
// exactly size bytes in the log as eventstore.CheckSize counts them.
func sizedAppend(t *testing.T, job string, n, big, size int) []events.Event {
	t.Helper()
	evs := NewEvents(job, 1, n)
	id := evs[big].ID
	measure := func(pad int) int {
		evs[big] = padded(job, evs[big].Version, pad)
		evs[big].ID = id
		msgs, err := eventstore.EncodeAppend(job, 0, evs)
		require.NoError(t, err)
		return msgs[big].Size() + eventstore.BatchOverhead(big, n)
	}
	base := measure(0)
	require.Less(t, base, size)
	require.Equal(t, size, measure(size-base))
	return evs
}
