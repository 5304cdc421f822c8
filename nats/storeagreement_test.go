package nats_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/eventstore/storetest"
)

// bothStores is a fresh in-memory store and the event store on a fresh
// JetStream server, by name: for cases the conformance suite does not
// look at, where the two must agree.
func bothStores(t *testing.T) map[string]storetest.Store {
	t.Helper()
	_, es := setup(t)
	return map[string]storetest.Store{"memstore": memstore.New(memstore.Options{}), "jetstream": es}
}

// TestSameIDTwiceInOneGroup: two jobs' appends of one group commit
// carry the same event id; the log takes it once, on both stores.
func TestSameIDTwiceInOneGroup(t *testing.T) {
	for name, s := range bothStores(t) {
		for _, n := range []int{2, 12} { // plain messages in flight, and an atomic batch
			t.Run(name, func(t *testing.T) {
				var group []eventstore.Append
				for range n {
					job := storetest.NewJobID()
					group = append(group, eventstore.Append{JobID: job, Events: storetest.NewEvents(job, 1, 1)})
				}
				group[1].Events[0].ID = group[0].Events[0].ID
				res := s.AppendMany(context.Background(), group)
				require.NoError(t, res[0].Err)
				require.ErrorIs(t, res[1].Err, eventstore.ErrDuplicate, "n=%d", n)
			})
		}
	}
}

// TestPrefixThenOthers: the log holds the first two events of an
// append (as one append of their own) and then another event; the append
// of all three at the same version is a conflict on both stores.
func TestPrefixThenOthers(t *testing.T) {
	for name, s := range bothStores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			job := storetest.NewJobID()
			head := storetest.NewEvents(job, 1, 1)
			v0, err := s.Append(ctx, job, 0, head...)
			require.NoError(t, err)
			evs := storetest.NewEvents(job, 2, 3)
			v1, err := s.Append(ctx, job, v0, evs[:2]...)
			require.NoError(t, err)
			_, err = s.Append(ctx, job, v1, storetest.NewEvents(job, 4, 1)...)
			require.NoError(t, err)
			_, err = s.Append(ctx, job, v0, evs...)
			require.ErrorIs(t, err, eventstore.ErrConcurrency)
		})
	}
}
