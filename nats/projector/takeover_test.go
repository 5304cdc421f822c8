package projector_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// TestStandbyTakesOverFromAKilledHolder: the engine holding the
// projection lease is killed (its connection closes, its lease is never
// given up); a standby with the default settings takes over and writes
// serp_status for the jobs appended since. It does so within
// Config.Takeover of the kill, which the default TTL keeps under 5 s.
func TestStandbyTakesOverFromAKilledHolder(t *testing.T) {
	require.LessOrEqual(t, projector.Config{}.Takeover(), 5*time.Second)
	w := setup(t)
	w.more(3, "before")
	type engine struct {
		r    *projector.Runner
		kill func()
	}
	var engines []engine
	for _, name := range []string{"a", "b"} {
		nc, js := natstest.Connect(t, w.srv.URL)
		r, err := projector.New(t.Context(), js, projector.Config{Name: name})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = r.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-done })
		engines = append(engines, engine{r: r, kill: nc.Close})
	}
	w.caughtUp()
	holder, standby := engines[0], engines[1]
	if !holder.r.Stats().Holding {
		holder, standby = standby, holder
	}
	require.True(t, holder.r.Stats().Holding)

	holder.kill()
	killed := time.Now()
	w.more(3, "after")
	status, err := w.srv.JS.KeyValue(t.Context(), projections.StatusBucket)
	require.NoError(t, err)
	natstest.WaitFor(t, 4*projector.Config{}.Takeover(), func() error {
		for _, r := range w.recs {
			if _, err := status.Get(t.Context(), r.Event.JobID); err != nil {
				return fmt.Errorf("job %s: %w", r.Event.JobID, err)
			}
		}
		// Its figures are counted once the values it wrote are stored.
		if st := standby.r.Stats(); !st.Holding || st.Events == 0 {
			return fmt.Errorf("the standby holds %t, has applied %d events", st.Holding, st.Events)
		}
		return nil
	})
	t.Logf("serp_status written by the standby %s after the kill", time.Since(killed).Round(time.Millisecond))
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
}
