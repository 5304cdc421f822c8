package metrics

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/serper"
)

// Options configure Metrics.
type Options struct {
	// Tally is the log's running totals; nil leaves the job-level
	// figures out.
	Tally *projections.Tally
	// Lag measures the projections' lag at scrape time; nil leaves it out.
	Lag func(ctx context.Context) (Lag, error)
	// LastSeq reads the event log's last sequence at scrape time
	// (serpent_event_log_last_seq), whether or not any projections are
	// kept; nil, or an error, leaves it out.
	LastSeq func(ctx context.Context) (uint64, error)
	// ArchiveLag reads how many events SERP_ARCHIVE has not copied yet
	// (nats.ArchiveLag) at scrape time; an error says its copy is failing.
	// nil leaves it out.
	ArchiveLag func(ctx context.Context) (uint64, error)
	// Accounts reads the API accounts' spend and limiter figures at
	// scrape time; nil leaves them out.
	Accounts func(ctx context.Context) ([]Account, error)
	// Worker names this process in the serpent_info metric.
	Worker string
	// Version is serpent's version, for serpent_info.
	Version string
}

// Lag is how far the projections trail the log at a scrape: the events
// not applied yet, and how long the oldest of them has waited.
type Lag struct {
	Pending uint64
	Behind  time.Duration
	// CatchingUp is set while this process's projection runner catches
	// up with a log it trails by more than a batch, at CatchUpRate events
	// a second, with about CatchUpLeft to go.
	CatchingUp  bool
	CatchUpRate float64
	CatchUpLeft time.Duration
}

// Metrics is the registry of one serpent process and the hooks that feed
// its timings. It is safe for concurrent use.
type Metrics struct {
	reg          *prometheus.Registry
	api          *prometheus.HistogramVec
	appends      *prometheus.HistogramVec
	groupAppends prometheus.Histogram
	groupEvents  prometheus.Histogram
	groupTime    prometheus.Histogram
	sweep        sweepMetrics
}

// New returns a registry with the Go runtime and process collectors,
// serpent's histograms and, per opts, the log's totals and the lag.
func New(opts Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), sweep: newSweepMetrics()}
	m.api = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "serpent_api_request_seconds", Help: "Time from sending a search to its outcome, by API account and reply (HTTP status, or unknown).",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 100},
	}, []string{"account", "status"})
	m.appends = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "serpent_append_seconds", Help: "Time an append to the event log took as the engine waited for it (group commit included), by result.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5},
	}, []string{"result"})
	sizes := []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}
	m.groupAppends = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "serpent_group_commit_appends", Help: "Appends (jobs) written together in one group commit.", Buckets: sizes})
	m.groupEvents = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "serpent_group_commit_events", Help: "Events written together in one group commit.", Buckets: sizes})
	m.groupTime = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "serpent_group_commit_seconds", Help: "Time one group commit took, from write to acknowledgement.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5}})
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "serpent_info", Help: "This serpent process: always 1.",
		ConstLabels: prometheus.Labels{"worker": opts.Worker, "version": opts.Version}})
	info.Set(1)
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.api, m.appends, m.groupAppends, m.groupEvents, m.groupTime, info)
	m.reg.MustRegister(m.sweep.collectors()...)
	if opts.Tally != nil || opts.Lag != nil || opts.LastSeq != nil || opts.ArchiveLag != nil {
		m.reg.MustRegister(&logCollector{tally: opts.Tally, lag: opts.Lag, lastSeq: opts.LastSeq, archiveLag: opts.ArchiveLag})
	}
	if opts.Accounts != nil {
		m.reg.MustRegister(&accountCollector{read: opts.Accounts})
	}
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the underlying registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Searched records one search: how long it took and how it came back. It
// is the engine's observer (engine.Observer).
func (m *Metrics) Searched(account string, res serper.Result) {
	if account == "" {
		account = "default"
	}
	status := "unknown"
	if res.Confirmed {
		status = strconv.Itoa(res.Status)
	}
	m.api.WithLabelValues(account, status).Observe(res.Latency.Seconds())
}

// Committed records one group commit; it is group.Options.OnCommit.
func (m *Metrics) Committed(appends, events int, took time.Duration) {
	m.groupAppends.Observe(float64(appends))
	m.groupEvents.Observe(float64(events))
	m.groupTime.Observe(took.Seconds())
}
