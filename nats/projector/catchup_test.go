package projector_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats/projector"
)

// TestCatchUpProgress: a runner that starts far behind the log says it
// is catching up, with the events done and left out of the log it found,
// until a batch takes all there is; then it says it is not.
func TestCatchUpProgress(t *testing.T) {
	w := setup(t)
	w.more(30, "backlog")
	last := w.recs[len(w.recs)-1].Seq
	var (
		mu   sync.Mutex
		seen []projector.CatchUp
		r    *projector.Runner
	)
	ready := make(chan struct{})
	hook := func(uint64) error {
		<-ready
		if c, ok := r.CatchingUp(); ok {
			mu.Lock()
			seen = append(seen, c)
			mu.Unlock()
		}
		return nil
	}
	r, _ = w.runner("r1", projector.Config{Batch: 10, WriteClaims: true, Hooks: projector.Hooks{AfterWrite: hook}})
	close(ready)
	w.caughtUp()

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, seen, "a runner 10 events a batch behind a log of %d catches up", last)
	for i, c := range seen {
		require.Equal(t, last, c.Total(), "the log it found, whole")
		require.Positive(t, c.Done)
		require.Positive(t, c.Pending)
		require.Positive(t, c.Rate)
		if i > 0 {
			require.Greater(t, c.Done, seen[i-1].Done)
		}
	}
	_, ok := r.CatchingUp()
	require.False(t, ok, "caught up")
}
