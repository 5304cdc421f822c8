package chaos_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/chaos"
)

// TestChaos is a small chaos run with real processes: three serpent run
// workers, a NATS server and a sandbox, with workers killed, frozen past
// their lease and the server restarted while 150 jobs run. Every promise
// the run checks must hold, no worker may end by itself (a crash the
// supervisor restarted), and the naive worker, under the same faults and
// with no crashes of its own, must be caught buying twice.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes for about a minute")
	}
	cfg := chaos.DefaultConfig()
	cfg.Binary, cfg.Dir = serpentBinary(t), t.TempDir()
	cfg.Jobs, cfg.Malformed = 150, 15
	cfg.PublishFor, cfg.Spread = 15*time.Second, 20*time.Second
	cfg.KillEvery, cfg.PauseEvery, cfg.NATSRestartEvery = 4*time.Second, 6*time.Second, 10*time.Second
	cfg.ChaosFor, cfg.Settle = 45*time.Second, 2*time.Minute
	// The naive worker does not crash here: a crash after a purchase buys
	// again on its own, faults or not, and the assertion below is that
	// the provider's faults make it buy twice (with neither, it buys once:
	// TestNaiveWorkerBuysOnceWithoutFaults).
	cfg.NaiveJobs, cfg.NaiveCrash = 300, 0
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	rep, err := chaos.Run(ctx, cfg, chaos.DefaultChecks(), t.Output())
	require.NoError(t, err)
	var table bytes.Buffer
	require.NoError(t, rep.WriteTable(&table))
	t.Log("\n" + table.String())

	require.Empty(t, rep.Violations)
	require.True(t, rep.Settled, "every job finished after the faults stopped")
	require.Equal(t, cfg.Jobs, rep.Jobs)
	require.Zero(t, rep.DuplicateCharges)
	require.Zero(t, rep.Lost)
	require.Equal(t, cfg.Malformed, sumValues(rep.Rejections), "every malformed command has its rejection")
	require.Positive(t, rep.WorkerKills+rep.Pauses, "the chaos happened")
	require.Zero(t, rep.WorkerExits, "a worker ended by itself (see the violations)")
	require.NotEmpty(t, rep.SandboxFaults)
	require.NotNil(t, rep.Naive)
	require.Zero(t, rep.Naive.Crashes)
	require.Positive(t, rep.Naive.DuplicateJobs, "under the same faults, without crashing, the naive worker buys twice")
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
