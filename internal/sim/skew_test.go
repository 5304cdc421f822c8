package sim

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

// TestServerClockAhead: the server's clock, which stamps the wake-ups and
// fires the timers, runs 1.2 s ahead of the workers'. Every timer the
// intake arms (by the workers' clock) fires 1.2 s early; the work
// consumer's handler (engine.Engine.HandleWork) reads the wake-up's stamp,
// hands the delivery back for the rest of the wait (a negative
// acknowledgement with that delay) and steps the job when it comes back.
// Without the correction the wake-up would be armed again and fire again
// at once, for ever on the simulation's clock, which stands still while
// anything can happen: the scheduler calls that a livelock.
func TestServerClockAhead(t *testing.T) {
	cfg := RandomConfig(3, 60)
	cfg.Spread, cfg.Ahead, cfg.ServerAhead = 30*time.Minute, 5*time.Minute, 1200*time.Millisecond
	cfg.Faults, cfg.Sandbox.Faults = Faults{}, sandbox.Faults{} // a nak is a hand-back
	rep := runWorld(t, cfg, nil, nil)
	require.False(t, rep.Failed(), "%s", rep)
	require.GreaterOrEqual(t, rep.Naks, rep.Jobs, "every job woken early is handed back once:\n%s", rep)

	cfg = RandomConfig(4, 60)
	cfg.ServerAhead = 1200 * time.Millisecond
	rep = runWorld(t, cfg, nil, nil)
	require.False(t, rep.Failed(), "with faults:\n%s", rep)
}
