package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Outcomes of a round of the sweep for lost timers
// (serpent_sweeps_total): the jobs swept, the round left to another
// engine whose turn it was, the metrics' fold of the log behind (the jobs
// not swept), or the sweep failed.
const (
	SweepSwept  = "swept"
	SweepLeft   = "left"
	SweepBehind = "behind"
	SweepFailed = "failed"
)

// Kinds of timers a sweep re-arms (serpent_sweep_rearmed_total).
const (
	TimerOfJob      = "job"
	TimerOfSchedule = "schedule"
)

// sweepMetrics are the sweep's: how its rounds went, how long a sweep of
// the jobs took and how many it looked at, and the timers it re-armed.
type sweepMetrics struct {
	rounds  *prometheus.CounterVec
	took    prometheus.Histogram
	jobs    prometheus.Gauge
	rearmed *prometheus.CounterVec
}

func newSweepMetrics() sweepMetrics {
	return sweepMetrics{
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "serpent_sweeps_total", Help: "Rounds of this engine's sweep for lost timers, by outcome: swept (the jobs in flight), left (to the engine whose turn it was), behind (the fold of the log behind: the schedules only), failed.",
		}, []string{"outcome"}),
		took: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "serpent_sweep_seconds", Help: "Time this engine's sweeps of the jobs in flight took.",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 120, 300}}),
		jobs: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "serpent_sweep_jobs", Help: "Jobs in flight this engine's last sweep looked at."}),
		rearmed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "serpent_sweep_rearmed_total", Help: "Lost timers this engine's sweeps armed again, of jobs and of recurring schedules (not those of jobs claimed under a running lease, armed at the lease's end in case).",
		}, []string{"timer"}),
	}
}

func (s sweepMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{s.rounds, s.took, s.jobs, s.rearmed}
}

// Swept records a sweep of jobs jobs in flight that took took.
func (m *Metrics) Swept(took time.Duration, jobs int) {
	// The round last: a scrape that counts it sees its figures too.
	m.sweep.took.Observe(took.Seconds())
	m.sweep.jobs.Set(float64(jobs))
	m.sweep.rounds.WithLabelValues(SweepSwept).Inc()
}

// SweepRound records a round that swept no jobs, by outcome (SweepLeft,
// SweepBehind, SweepFailed).
func (m *Metrics) SweepRound(outcome string) {
	m.sweep.rounds.WithLabelValues(outcome).Inc()
}

// Rearmed records n lost timers of kind timer (TimerOfJob,
// TimerOfSchedule) that a sweep armed again.
func (m *Metrics) Rearmed(timer string, n int) {
	if n > 0 {
		m.sweep.rearmed.WithLabelValues(timer).Add(float64(n))
	}
}
