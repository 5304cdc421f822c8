package bench

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// benchInflight is the inflight phase: an engine started on many jobs in
// flight (scheduled, waiting for slots days ahead), as after a restart
// of a busy deployment. What it costs follows the jobs in flight: its
// metrics' fold, its sweep for lost timers and its memory.
type benchInflight struct {
	Jobs int `json:"jobs"`
	// LostTimers is how many of the jobs were seeded without a timer, for
	// the first sweep to arm again: one in a thousand.
	LostTimers int           `json:"lost_timers"`
	Seed       benchSeedInfo `json:"seed"`
	// Engine is at Jobs jobs in flight, EngineSmall at --scale-small (when
	// fewer), to compare with: PeakRSSRatio is Engine's peak RSS over
	// EngineSmall's.
	Engine       benchInflightEngine  `json:"engine"`
	EngineSmall  *benchInflightEngine `json:"engine_small,omitempty"`
	PeakRSSRatio float64              `json:"engine_peak_rss_ratio,omitempty"`
}

// benchInflightEngine is "serpent run --projections=false" as a child
// process on a log of jobs in flight: started on it once, then again.
type benchInflightEngine struct {
	Measured bool   `json:"measured"`
	Why      string `json:"not_measured,omitempty"`
	Binary   string `json:"binary,omitempty"`
	Jobs     int    `json:"jobs"`
	// First folds the log from its start, Restart from the checkpoint the
	// first left.
	First   benchInflightStart `json:"first"`
	Restart benchInflightStart `json:"restart"`
}

// benchInflightStart is one start of the engine: how long until its
// metrics had counted the log, its sweep of the jobs in flight, and its
// memory after the sweep.
type benchInflightStart struct {
	// ResumedFrom is the sequence of the metrics checkpoint it found (0:
	// none; Why says why it could not take one).
	ResumedFrom uint64 `json:"resumed_from_seq"`
	Why         string `json:"not_resumed,omitempty"`
	// StartSeconds runs from exec to its status page being up;
	// CatchUpSeconds from then to ready with its metrics at the log's end.
	StartSeconds   float64 `json:"start_seconds"`
	CatchUpSeconds float64 `json:"catch_up_seconds"`
	// SweepSeconds is how long its sweep of the SweptJobs jobs in flight
	// took (serpent_sweep_seconds), Rearmed the lost timers it armed again
	// (serpent_sweep_rearmed_total).
	SweepSeconds float64 `json:"sweep_seconds"`
	SweptJobs    int     `json:"swept_jobs"`
	Rearmed      int     `json:"rearmed"`
	RSSMB        float64 `json:"rss_mb"`
	PeakRSSMB    float64 `json:"peak_rss_mb"`
}

// lostTimer says whether seeded job i is seeded without its timer.
func lostTimer(i int) bool { return i%1000 == 999 }

// lostTimers is how many of jobs [0, n) lostTimer leaves without one.
func lostTimers(n int) int { return n / 1000 }

// inflight runs the inflight phase: at --inflight-jobs jobs in flight, and
// at --scale-small to compare with, each on a fresh log of its own.
func (b *benchRun) inflight(ctx context.Context) (benchInflight, error) {
	n := b.f.inflightJobs
	r := benchInflight{Jobs: n, LostTimers: lostTimers(n)}
	small := min(b.f.scaleSmall, n)
	var err error
	if r.Engine, r.Seed, err = b.inflightOn(ctx, n); err != nil {
		return r, err
	}
	if small < n {
		e, _, err := b.inflightOn(ctx, small)
		if err != nil {
			return r, err
		}
		r.EngineSmall = &e
		if e.First.PeakRSSMB > 0 {
			r.PeakRSSRatio = round2(r.Engine.First.PeakRSSMB / e.First.PeakRSSMB)
		}
	}
	return r, nil
}

// inflightOn seeds jobs jobs in flight in a folder of their own and runs
// the engine on them.
func (b *benchRun) inflightOn(ctx context.Context, jobs int) (benchInflightEngine, benchSeedInfo, error) {
	e := benchInflightEngine{Jobs: jobs}
	dir := filepath.Join(b.dir, fmt.Sprintf("inflight-%d", jobs))
	seed, err := seedInflight(ctx, dir, newInflightSeeder("inflight"), jobs, b.prog)
	if err != nil {
		return e, seed, err
	}
	bin, why := engineBinary(b.env)
	if bin == "" {
		e.Why = why
		return e, seed, nil
	}
	e.Binary = bin
	srv, nc, js, err := startBenchServer(dir, 0)
	if err != nil {
		return e, seed, err
	}
	defer srv.Shutdown()
	defer nc.Close()
	label := fmt.Sprintf("inflight: engine at %d jobs", jobs)
	if e.First, err = b.inflightStart(ctx, bin, srv.ClientURL(), js, label, lostTimers(jobs)); err != nil {
		return e, seed, err
	}
	if e.Restart, err = b.inflightStart(ctx, bin, srv.ClientURL(), js, label+", again", 0); err != nil {
		return e, seed, err
	}
	e.Measured = e.First.PeakRSSMB > 0
	if !e.Measured {
		e.Why = "no /proc/<pid>/status on this system"
	}
	return e, seed, nil
}

// inflightStart starts the engine (without projections, so that its
// memory is its metrics' and its sweep's), waits until its metrics have
// counted the log and it has swept the jobs in flight once, checks that
// the sweep armed again the lost timers it should have (and no other), and
// stops it.
func (b *benchRun) inflightStart(ctx context.Context, bin, natsURL string, js jetstream.JetStream, label string, lost int) (benchInflightStart, error) {
	var s benchInflightStart
	last, err := lastSeq(ctx, js, snats.EventStream)
	if err != nil {
		return s, fmt.Errorf("bench: the log's last sequence: %w", err)
	}
	if s.ResumedFrom, _, err = projector.ResumeTally(ctx, js, projections.NewTally().ForgetFinished()); err != nil {
		s.Why = err.Error()
	}
	p, err := b.startChild(ctx, bin, natsURL, false)
	if err != nil {
		return s, err
	}
	defer p.stop()
	s.StartSeconds = p.startSeconds
	caught := time.Now()
	if err := b.childCatchUp(ctx, p, js, last, false, label); err != nil {
		return s, err
	}
	s.CatchUpSeconds = round2(time.Since(caught).Seconds())

	// Its one sweep (--sweep-every 0), made once the fold has caught up.
	client := &http.Client{Timeout: 10 * time.Second}
	var m map[string]float64
	if err := pollUntil(ctx, 2*time.Hour, 100*time.Millisecond, func() (bool, string, error) {
		var err error
		if m, err = childMetrics(client, p.addr); err != nil {
			return false, err.Error(), p.gone()
		}
		if m[`serpent_sweeps_total{outcome="failed"}`] > 0 {
			return false, "", fmt.Errorf("its sweep failed")
		}
		return m[`serpent_sweeps_total{outcome="swept"}`] > 0, "no sweep of the jobs yet", p.gone()
	}); err != nil {
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
		return s, p.failed("sweeping: %v", err)
	}
	s.SweepSeconds = round2(m["serpent_sweep_seconds_sum"])
	s.SweptJobs = int(m["serpent_sweep_jobs"])
	s.Rearmed = int(m[`serpent_sweep_rearmed_total{timer="job"}`])
	if s.Rearmed != lost {
		return s, p.failed("its sweep armed %d timers again, but %d were lost", s.Rearmed, lost)
	}
	s.RSSMB = round2(float64(procStatus(p.cmd.Process.Pid, "VmRSS")) / (1 << 20))
	s.PeakRSSMB = max(round2(float64(procStatus(p.cmd.Process.Pid, "VmHWM"))/(1<<20)), s.RSSMB)
	if err := p.stop(); err != nil {
		return s, p.failed("stopping: %v", err)
	}
	return s, nil
}

// seedInflight seeds jobs jobs in flight into the log in dir, on a server
// of its own that fsyncs every seedSync, with their timers in SERP_WORK
// as intake arms them: a JetStream message schedule at the job's slot,
// but for one job in a thousand (lostTimer), whose timer is lost.
func seedInflight(ctx context.Context, dir string, s *benchSeeder, jobs int, prog progressFunc) (benchSeedInfo, error) {
	info := benchSeedInfo{Jobs: jobs, MsgIDs: s.msgIDs, Fsync: "every " + seedSync.String()}
	srv, nc, js, err := startBenchServer(dir, seedSync)
	if err != nil {
		return info, err
	}
	defer srv.Shutdown()
	defer nc.Close()
	if _, err := snats.EnsureStream(ctx, js, snats.WorkStreamConfig(snats.StreamOptions{}), false); err != nil {
		return info, fmt.Errorf("bench: %w", err)
	}
	start := time.Now()
	if info.Events, err = s.seed(ctx, js, 0, jobs, "inflight: seeding jobs", prog); err != nil {
		return info, err
	}
	label := "inflight: seeding timers"
	var window []jetstream.PubAckFuture
	for i := range jobs {
		if !lostTimer(i) {
			sched, err := s.schedule(i)
			if err != nil {
				return info, err
			}
			fut, err := js.PublishMsgAsync(snats.TimerMsg(sched.JobID, sched.Slot))
			if err != nil {
				return info, fmt.Errorf("bench: seeding timers: %w", err)
			}
			window = append(window, fut)
		}
		if len(window) < 1000 && i < jobs-1 {
			continue
		}
		for _, fut := range window {
			select {
			case <-fut.Ok():
			case err := <-fut.Err():
				return info, fmt.Errorf("bench: seeding timers: %w", err)
			case <-ctx.Done():
				return info, ctx.Err()
			}
		}
		window = window[:0]
		prog(label, i+1, jobs)
	}
	info.Seconds = round2(time.Since(start).Seconds())
	info.EventsPerSec = perSec(int(info.Events), time.Since(start))
	return info, nil
}
