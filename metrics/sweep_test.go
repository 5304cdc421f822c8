package metrics_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/metrics"
)

// TestSweepMetrics: the sweep's rounds by outcome, the time and size of
// its sweeps of the jobs, and the timers it re-armed.
func TestSweepMetrics(t *testing.T) {
	m := metrics.New(metrics.Options{})
	require.Contains(t, scrape(t, m), "serpent_sweep_seconds_count 0\n", "no sweep yet")

	m.Swept(1500*time.Millisecond, 40000)
	m.SweepRound(metrics.SweepLeft)
	m.SweepRound(metrics.SweepLeft)
	m.SweepRound(metrics.SweepBehind)
	m.Rearmed(metrics.TimerOfJob, 3)
	m.Rearmed(metrics.TimerOfSchedule, 0)
	body := scrape(t, m)
	for _, want := range []string{
		`serpent_sweeps_total{outcome="swept"} 1`,
		`serpent_sweeps_total{outcome="left"} 2`,
		`serpent_sweeps_total{outcome="behind"} 1`,
		`serpent_sweep_seconds_sum 1.5`,
		`serpent_sweep_seconds_bucket{le="5"} 1`,
		`serpent_sweep_jobs 40000`,
		`serpent_sweep_rearmed_total{timer="job"} 3`,
	} {
		require.Contains(t, body, want+"\n")
	}
	require.NotContains(t, body, `serpent_sweep_rearmed_total{timer="schedule"}`, "none re-armed: no sample")
}
