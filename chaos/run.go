package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
)

// run is one chaos run in progress.
type run struct {
	cfg      Config
	bin, dir string
	say      func(format string, args ...any)
	start    time.Time
	// token is the sandbox's bearer token, drawn for the run: a secret
	// no one else knows, so finding it in the log, the processes' output
	// or a stream is a broken promise 8 (see tokenCheck).
	token string

	mu  sync.Mutex // guards rng, rep's counters, the processes
	rng *rand.Rand
	rep *Report

	natsArgs []string
	natsURL  string
	nats     *proc
	sbURL    string
	sandbox  *proc
	workers  []*workerSlot
	stopping bool
	exits    []workerExit // workers that ended by themselves

	nc *natsgo.Conn
	js jetstream.JetStream

	cmds []command
}

// workerSlot is one worker process, restarted whenever it dies.
type workerSlot struct {
	name   string
	args   []string
	proc   *proc // nil while down
	killed bool  // the last exit was ours
	done   chan struct{}
}

// Run makes one chaos run: it starts a NATS server, a sandbox with cfg's
// faults and cfg.Workers serpent run processes as real processes, publishes
// the jobs, kills, pauses and restarts processes while they run, waits for
// every job to finish, and checks serpent's promises from the sandbox's
// books and serpent's own streams (see Report). checks are run too (see
// DefaultChecks). progress receives a line per phase and per fault.
//
// Every process it started is gone when it returns, whatever happened.
func Run(ctx context.Context, cfg Config, checks []Check, progress io.Writer) (rep *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if progress == nil {
		progress = io.Discard
	}
	r := &run{cfg: cfg, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0xc4a05)), rep: newReport(cfg), token: secretToken()}
	var plMu sync.Mutex
	r.say = func(format string, args ...any) {
		plMu.Lock()
		defer plMu.Unlock()
		fmt.Fprintf(progress, "chaos %6.1fs  %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
	}
	r.start = time.Now()
	if r.dir = cfg.Dir; r.dir == "" {
		if r.dir, err = os.MkdirTemp("", "serpent-chaos-"); err != nil {
			return nil, err
		}
	}
	if !cfg.Keep && cfg.Dir == "" {
		defer os.RemoveAll(r.dir)
	}
	if err := os.MkdirAll(filepath.Join(r.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	defer r.killAll()
	if r.bin, err = Binary(ctx, cfg.Binary, r.dir); err != nil {
		return nil, err
	}
	r.say("binary %s, data and logs in %s", r.bin, r.dir)
	if err := r.startNATS(ctx); err != nil {
		return nil, err
	}
	if err := r.startSandbox(ctx); err != nil {
		return nil, err
	}
	if err := r.connect(); err != nil {
		return nil, err
	}
	defer r.nc.Close()
	if err := r.startWorkers(ctx); err != nil {
		return nil, err
	}
	r.cmds = commands(cfg, time.Now(), r.rng)
	r.rep.countCommands(r.cmds)
	r.say("%d workers ready; publishing %d commands (%d jobs, %d malformed) over %s",
		cfg.Workers, len(r.cmds), cfg.Jobs, cfg.Malformed, cfg.PublishFor)

	w := newWatch(r)
	phase, stopPhase := context.WithCancel(ctx)
	chaos, stopChaos := context.WithCancel(phase)
	var wg sync.WaitGroup
	injecting := make(chan struct{})
	wg.Add(2)
	go func() { defer wg.Done(); r.publish(phase) }()
	go func() { defer wg.Done(); w.run(phase) }()
	go func() { defer close(injecting); r.inject(chaos) }()

	// Faults until every job is done or ChaosFor has passed; then every
	// job must finish within Settle.
	select {
	case <-ctx.Done():
	case <-time.After(cfg.ChaosFor):
	case <-w.done:
	}
	stopChaos()
	<-injecting
	r.calm()
	r.say("faults stop: %d of %d jobs finished", w.finished(), cfg.Jobs)
	r.rep.FaultsStopped = time.Since(r.start)
	settled := false
	select {
	case <-ctx.Done():
	case <-time.After(cfg.Settle):
	case <-w.done:
		settled = true
	}
	stopPhase()
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	r.rep.Settled = settled
	r.rep.Quiescent = time.Since(r.start)
	if !settled {
		// A job that finishes while the checks read the log would pass
		// them; the promise is that every job finishes within --settle.
		r.rep.violation("not every job finished within --settle (%s) of the faults stopping (promise 5)", cfg.Settle)
	}
	r.say("all jobs finished: %t, %s after the start; checking", settled, r.rep.Quiescent.Round(time.Second))
	if cfg.Retention > 0 {
		// The checks then read jobs gone from the live log, jobs
		// leaving and jobs live, and the workers run on meanwhile.
		r.say("waiting until half the jobs have left the live log (retention %s)", cfg.Retention)
		if err := r.waitLeft(ctx, cfg.Jobs/2, cfg.Retention+cfg.Spread+time.Minute); err != nil {
			r.rep.violation("%v", err)
		}
	}
	// The workers stay up while the checks run: their projection runner
	// catches up with the log.
	if err := r.check(ctx, checks); err != nil {
		return nil, err
	}
	r.stopWorkers()
	r.exitViolations()
	r.stopNATSAndSandbox()
	if cfg.Naive {
		r.say("naive comparison: %d jobs, a fresh key per delivery, same faults", cfg.NaiveJobs)
		n, err := runNaive(ctx, cfg)
		if err != nil {
			return nil, err
		}
		r.rep.Naive = n
	}
	r.rep.Elapsed = time.Since(r.start)
	return r.rep, nil
}

// waitLeft polls SERP_EVENTS until at most live jobs are left in it (its
// subjects), for at most bound.
func (r *run) waitLeft(ctx context.Context, live int, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		s, err := r.js.Stream(ctx, snats.EventStream)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		if n := info.State.NumSubjects; n <= uint64(live) {
			r.rep.LeftLive = r.cfg.Jobs - int(n)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d jobs are still in the live log %s after the horizon", info.State.NumSubjects, bound)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
