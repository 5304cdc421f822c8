package sim_test

import (
	"testing"

	"github.com/serpent-engine/serpent/internal/sim"
	"github.com/stretchr/testify/require"
)

// TestDeterminism runs the same seeds twice: every event, every id, every
// fault and every scheduling decision must come out the same, or a failing
// seed could not be replayed.
func TestDeterminism(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 1107, 1126} {
		cfg := sim.RandomConfig(seed, 120)
		first := sim.Run(t, cfg, nil)
		second := sim.Run(t, cfg, nil)
		require.Equal(t, first.Digest, second.Digest, "seed %d ran differently twice:\n%s\n%s", seed, first, second)
		require.Equal(t, first.String(), second.String())
	}
}
