package nats_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/store"
	"github.com/serpent-engine/serpent/store/memstore"
	"github.com/serpent-engine/serpent/store/storetest"
)

// TestPrefixThenOthers: the log holds the first two events of an
// append (as one append of their own) and then another event; the append
// of all three at the same version is a conflict on both stores.
func TestPrefixThenOthers(t *testing.T) {
	_, es := setup(t)
	for name, s := range map[string]storetest.Store{"memstore": memstore.New(memstore.Options{}), "jetstream": es} {
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
			require.ErrorIs(t, err, store.ErrConcurrency)
		})
	}
}
