package nats_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/store"
	"github.com/serpent-engine/serpent/store/memstore"
	"github.com/serpent-engine/serpent/store/storetest"
)

// TestSameIDTwiceInOneGroup: two jobs' appends of one group commit
// carry the same event id; the log takes it once, on both stores.
func TestSameIDTwiceInOneGroup(t *testing.T) {
	_, es := setup(t)
	for name, s := range map[string]storetest.Store{"memstore": memstore.New(memstore.Options{}), "jetstream": es} {
		for _, n := range []int{2, 12} { // plain messages in flight, and an atomic batch
			t.Run(name, func(t *testing.T) {
				var group []store.Append
				for range n {
					job := storetest.NewJobID()
					group = append(group, store.Append{JobID: job, Events: storetest.NewEvents(job, 1, 1)})
				}
				group[1].Events[0].ID = group[0].Events[0].ID
				res := s.AppendMany(context.Background(), group)
				require.NoError(t, res[0].Err)
				require.ErrorIs(t, res[1].Err, store.ErrDuplicate, "n=%d", n)
			})
		}
	}
}
