package chaos

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

// TestNaiveWorkerBuysOnceWithoutFaults: with no provider fault and no
// crash (NaiveCrash 0), and a client and an ack wait no search outlasts,
// the naive worker buys every observation once. So when TestChaos, with
// NaiveCrash 0, finds it buying twice, the provider's faults did it; with
// the run's default NaiveCrash, crashes after the purchase buy twice on
// their own, faults or not.
func TestNaiveWorkerBuysOnceWithoutFaults(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Faults, cfg.NaiveCrash, cfg.NaiveJobs = sandbox.Faults{}, 0, 100
	cfg.ClientTimeout, cfg.AckWait = time.Hour, time.Hour
	n, err := runNaive(context.Background(), cfg)
	require.NoError(t, err)
	require.Equal(t, cfg.NaiveJobs, n.Succeeded)
	require.Equal(t, cfg.NaiveJobs, n.Charges)
	require.Zero(t, n.DuplicateJobs)
	require.Zero(t, n.Crashes)
}
