package bench

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"path/filepath"
	"slices"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
)

// benchScale is the scale phase: a log of many finished jobs, the cost of
// loading one job as it grows, and the engine's memory on it.
type benchScale struct {
	Jobs   int    `json:"jobs"`
	Events uint64 `json:"events"`
	// Seed is how the log was filled (setup, not a measured figure).
	Seed benchSeedInfo `json:"seed"`
	// Small is the load cost at 10,000 jobs (or --scale-jobs, if fewer),
	// Large at --scale-jobs; LoadMedianRatio is Large's median over
	// Small's (target: 1.5 at most).
	Small           benchLoad `json:"load_small"`
	Large           benchLoad `json:"load_large"`
	LoadMedianRatio float64   `json:"load_median_ratio"`
	LoadP99Ratio    float64   `json:"load_p99_ratio"`
	// Recent is the load cost at --scale-jobs jobs for jobs among the
	// newest 10,000 only: the jobs an engine works on are recent, and
	// their events are in the blocks the server holds in memory.
	Recent benchLoad `json:"load_recent"`
	// LoadRecentMedianRatio is Recent's median over Small's: the target
	// for the jobs an engine loads.
	LoadRecentMedianRatio float64 `json:"load_recent_median_ratio,omitempty"`
	// Engine is "serpent run" as a child process on this log, EngineSmall
	// the same on a fresh log of Small.Jobs jobs, to compare with (when
	// this log is larger). FreshRatio is the fresh jobs' rate on this log
	// over their rate on the small one; PeakRSSRatio the engine's peak RSS
	// here over there.
	Engine       benchChild  `json:"engine"`
	EngineSmall  *benchChild `json:"engine_small,omitempty"`
	FreshRatio   float64     `json:"engine_fresh_jobs_ratio,omitempty"`
	PeakRSSRatio float64     `json:"engine_peak_rss_ratio,omitempty"`
	// BenchPeakRSSMB is this bench process (the bench, its embedded NATS
	// servers and its in-process engine), not the engine above.
	BenchPeakRSSMB float64 `json:"bench_process_peak_rss_mb"`
}

// benchSeedInfo says how finished jobs were written into a log.
type benchSeedInfo struct {
	Jobs         int     `json:"jobs"`
	Events       uint64  `json:"events"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	// ProjectionSeconds is the wait, after the last write, for the
	// projection runner that applied the seeded events alongside (0: the
	// projections were left to the engine).
	ProjectionSeconds float64 `json:"projection_seconds"`
	// MsgIDs says whether the seeded messages carry Nats-Msg-Id.
	MsgIDs bool `json:"msg_ids"`
	// Fsync is the server's fsync while seeding.
	Fsync string `json:"fsync"`
}

// benchLoad is the cost of EventStore.Load of random jobs.
type benchLoad struct {
	Jobs int `json:"jobs"`
	// From is the first job loads pick from (jobs From to Jobs-1).
	From          int     `json:"from_job,omitempty"`
	StreamMsgs    uint64  `json:"stream_messages"`
	Loads         int     `json:"loads"`
	EventsPerLoad float64 `json:"events_per_load"`
	MedianMicros  float64 `json:"median_us"`
	P99Micros     float64 `json:"p99_us"`
	MaxMicros     float64 `json:"max_us"`
}

// benchChild is the engine run as a child process on the scale log.
type benchChild struct {
	Measured bool   `json:"measured"`
	Why      string `json:"not_measured,omitempty"`
	Binary   string `json:"binary,omitempty"`
	// Jobs is how many finished jobs its log held; Projections whether it
	// kept its projections (--scale-projections).
	Jobs        int  `json:"jobs"`
	Projections bool `json:"projections"`
	// StartSeconds runs from exec to the status page being up;
	// CatchUpSeconds from then to ready: /readyz 200, no projection lag
	// (with projections) and the metrics tally at the log's end.
	StartSeconds        float64 `json:"start_seconds"`
	CatchUpSeconds      float64 `json:"catch_up_seconds"`
	CatchUpEventsPerSec float64 `json:"catch_up_events_per_sec"`
	CatchUpMsgsPerSec   float64 `json:"catch_up_messages_per_sec"`
	// RSSAfterCatchUpMB is its resident memory once caught up; PeakRSSMB
	// its high-water mark (VmHWM) after the fresh jobs.
	RSSAfterCatchUpMB float64   `json:"rss_after_catch_up_mb"`
	PeakRSSMB         float64   `json:"peak_rss_mb"`
	FreshJobs         *benchE2E `json:"fresh_jobs,omitempty"`
	// Restart is the engine started again on the same log after it
	// stopped.
	Restart *benchRestart `json:"restart,omitempty"`
}

// benchRestart is the engine started again on a log it has counted.
type benchRestart struct {
	// ResumedFrom is the sequence of the metrics checkpoint the engine
	// found (0: none; Why says why it could not take one).
	ResumedFrom uint64 `json:"resumed_from_seq"`
	Why         string `json:"not_resumed,omitempty"`
	// StartSeconds runs from exec to its status page being up,
	// CatchUpSeconds from then to ready with its metrics at the log's end.
	StartSeconds   float64 `json:"start_seconds"`
	CatchUpSeconds float64 `json:"catch_up_seconds"`
	PeakRSSMB      float64 `json:"peak_rss_mb"`
}

// seedSync is the fsync interval of the servers the bench seeds logs on:
// seeding is setup, and at fsync always every publish (or atomic batch,
// which the server also stages on disk first) waits for a disk sync, a few
// thousand messages a second at best. Every measurement runs on a server
// restarted with fsync on every write.
const seedSync = time.Minute

// scale runs the scale phase on a fresh log in its own folder.
func (b *benchRun) scale(ctx context.Context) (benchScale, error) {
	n := b.f.scaleJobs
	r := benchScale{Jobs: n}
	dir := filepath.Join(b.dir, "scale")
	seeder := newBenchSeeder("scale", false)
	small := min(b.f.scaleSmall, n)

	// Seed the small log, time loads on it, seed the rest, time again: on a
	// server restarted with fsync always each time.
	r.Seed = benchSeedInfo{MsgIDs: seeder.msgIDs, Fsync: "every " + seedSync.String()}
	for _, step := range []struct {
		to  int
		out *benchLoad
	}{{small, &r.Small}, {n, &r.Large}} {
		from := r.Seed.Jobs
		if step.to > from {
			info, err := seedOffline(ctx, dir, seeder, from, step.to, "scale: seeding", b.prog, false)
			if err != nil {
				return r, err
			}
			r.Seed.add(info)
		}
		srv, nc, js, err := startBenchServer(dir, 0)
		if err != nil {
			return r, err
		}
		if step.to == n { // the recent jobs first, before the others fill the server's caches
			r.Recent, err = measureLoads(ctx, js, seeder, n-small, n, b.f.scaleLoads, b.prog)
		}
		var load benchLoad
		if err == nil {
			load, err = measureLoads(ctx, js, seeder, 0, step.to, b.f.scaleLoads, b.prog)
		}
		nc.Close()
		srv.Shutdown()
		if err != nil {
			return r, err
		}
		*step.out = load
		r.Events = r.Seed.Events
	}
	if r.Small.MedianMicros > 0 {
		r.LoadMedianRatio = round2(r.Large.MedianMicros / r.Small.MedianMicros)
		r.LoadP99Ratio = round2(r.Large.P99Micros / r.Small.P99Micros)
		if r.Recent.Loads > 0 {
			r.LoadRecentMedianRatio = round2(r.Recent.MedianMicros / r.Small.MedianMicros)
		}
	}

	r.BenchPeakRSSMB = round2(float64(vmHWM()) / (1 << 20))
	if !b.f.scaleEngine {
		r.Engine.Why = "--scale-engine=false"
		return r, nil
	}

	// The engine as its own process on that log, then on a fresh log of
	// the small size.
	var err error
	if r.Engine, err = b.engineOn(ctx, dir, n, r.Events); err != nil {
		return r, err
	}
	if small < n {
		base := filepath.Join(b.dir, "scale-small")
		seeded, err := seedOffline(ctx, base, newBenchSeeder("scale", false), 0, small, "scale: seeding the small log", b.prog, false)
		if err != nil {
			return r, err
		}
		e, err := b.engineOn(ctx, base, small, seeded.Events)
		if err != nil {
			return r, err
		}
		r.EngineSmall = &e
		if f, fs := r.Engine.FreshJobs, e.FreshJobs; f != nil && fs != nil && fs.JobsPerSec > 0 {
			r.FreshRatio = round2(f.JobsPerSec / fs.JobsPerSec)
		}
		if e.PeakRSSMB > 0 {
			r.PeakRSSRatio = round2(r.Engine.PeakRSSMB / e.PeakRSSMB)
		}
	}
	r.BenchPeakRSSMB = round2(float64(vmHWM()) / (1 << 20))
	return r, nil
}

// engineOn runs the engine as a child process on the log of jobs finished
// jobs (evs events) in dir, served by a server of its own started for it.
func (b *benchRun) engineOn(ctx context.Context, dir string, jobs int, evs uint64) (benchChild, error) {
	srv, nc, js, err := startBenchServer(dir, 0)
	if err != nil {
		return benchChild{}, err
	}
	defer srv.Shutdown()
	defer nc.Close()
	return b.childEngine(ctx, srv.ClientURL(), js, jobs, evs)
}

func (s *benchSeedInfo) add(o benchSeedInfo) {
	s.Seconds = round2(s.Seconds + o.Seconds)
	s.ProjectionSeconds = round2(s.ProjectionSeconds + o.ProjectionSeconds)
	s.Jobs += o.Jobs
	s.Events += o.Events
	if s.Seconds > 0 {
		s.EventsPerSec = round2(float64(s.Events) / s.Seconds)
	}
}

// startBenchServer starts an embedded JetStream server on dir (fsync on
// every write for sync 0) with SERP_EVENTS, and connects to it.
func startBenchServer(dir string, sync time.Duration) (*snats.Embedded, *natsgo.Conn, jetstream.JetStream, error) {
	srv, err := snats.StartEmbedded(snats.EmbeddedConfig{Dir: dir, Host: "127.0.0.1", Port: -1, SyncInterval: sync})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("bench: %w", err)
	}
	nc, js, err := benchConnect(srv.ClientURL())
	if err != nil {
		srv.Shutdown()
		return nil, nil, nil, err
	}
	if _, err := snats.EnsureEventStream(context.Background(), js, snats.EventStreamOptions{}); err != nil {
		nc.Close()
		srv.Shutdown()
		return nil, nil, nil, fmt.Errorf("bench: %w", err)
	}
	return srv, nc, js, nil
}

// seedOffline seeds jobs [from, to) into the log in dir on a server of its
// own that fsyncs every seedSync. With project, a projection runner applies
// them alongside (as a long-running engine would have), and seedOffline
// waits until it has. Nothing else may use dir meanwhile.
func seedOffline(ctx context.Context, dir string, s *benchSeeder, from, to int, label string, prog progressFunc, project bool) (benchSeedInfo, error) {
	info := benchSeedInfo{Jobs: to - from, MsgIDs: s.msgIDs, Fsync: "every " + seedSync.String()}
	srv, nc, js, err := startBenchServer(dir, seedSync)
	if err != nil {
		return info, err
	}
	defer srv.Shutdown()
	defer nc.Close()
	if project {
		runner, err := projector.New(ctx, js, projector.Config{Name: "serpent-bench-seed"})
		if err != nil {
			return info, fmt.Errorf("bench: %w", err)
		}
		rctx, stop := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() { defer close(stopped); _ = runner.Run(rctx) }()
		defer func() { stop(); <-stopped }()
	}
	start := time.Now()
	if info.Events, err = s.seed(ctx, js, from, to, label, prog); err != nil {
		return info, err
	}
	written := time.Now()
	info.Seconds = round2(written.Sub(start).Seconds())
	info.EventsPerSec = perSec(int(info.Events), written.Sub(start))
	if project {
		if err := waitProjections(ctx, js, 2*time.Hour); err != nil {
			return info, fmt.Errorf("bench: seeding: %w", err)
		}
		info.ProjectionSeconds = round2(time.Since(written).Seconds())
	}
	return info, nil
}

// measureLoads times EventStore.Load of loads random jobs among seeded
// jobs [from, jobs).
func measureLoads(ctx context.Context, js jetstream.JetStream, s *benchSeeder, from, jobs, loads int, prog progressFunc) (benchLoad, error) {
	r := benchLoad{Jobs: jobs, From: from, Loads: loads}
	info, err := js.Stream(ctx, snats.EventStream)
	if err != nil {
		return r, err
	}
	r.StreamMsgs = info.CachedInfo().State.Msgs
	st, err := snats.NewEventStore(ctx, js, snats.EventStoreOptions{})
	if err != nil {
		return r, err
	}
	rng := mrand.New(mrand.NewPCG(uint64(jobs), uint64(from)))
	ids := make([]string, loads+50)
	for i := range ids {
		if ids[i], err = s.jobID(from + rng.IntN(jobs-from)); err != nil {
			return r, err
		}
	}
	label := fmt.Sprintf("scale: loads at %d jobs", jobs)
	if from > 0 {
		label = fmt.Sprintf("scale: loads of jobs %d+", from)
	}
	took := make([]time.Duration, 0, loads)
	events := 0
	for i, id := range ids {
		t0 := time.Now()
		evs, _, err := st.Load(ctx, id)
		d := time.Since(t0)
		if err != nil {
			return r, fmt.Errorf("bench: load job %s: %w", id, err)
		}
		if len(evs) == 0 {
			return r, fmt.Errorf("bench: job %s is not in the log", id)
		}
		if i < 50 {
			continue // warming up the connection and the client
		}
		took = append(took, d)
		events += len(evs)
		prog(label, len(took), loads)
	}
	r.MedianMicros, r.P99Micros, r.MaxMicros = quantileMicros(took)
	r.EventsPerLoad = round2(float64(events) / float64(len(took)))
	return r, nil
}

// quantileMicros sorts took and returns its median, 99th percentile and
// maximum in microseconds.
func quantileMicros(took []time.Duration) (median, p99, maxi float64) {
	slices.Sort(took)
	us := func(d time.Duration) float64 { return round2(float64(d) / float64(time.Microsecond)) }
	return us(took[len(took)/2]), us(took[min(len(took)-1, len(took)*99/100)]), us(took[len(took)-1])
}
