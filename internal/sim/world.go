package sim

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// Stepper handles one delivery of a due job: engine.Engine, or (in the
// naive comparison) something that does it wrong.
type Stepper interface {
	Step(ctx context.Context, jobID string, keepAlive func()) (aggregate.Next, error)
}

// World is one simulated deployment: worker processes around an in-memory
// event store, the real sandbox behind the real client, and a model of
// JetStream's consumers and timers, all on a synctest bubble's fake clock.
// A seeded scheduler decides everything that can happen in either order.
type World struct {
	cfg   Config
	rng   *rand.Rand // the scheduler's own: used by the scheduler goroutine only
	start time.Time
	// NewStepper builds the handler of due jobs for a task; nil means the
	// real engine.
	NewStepper func(Ports) Stepper
	// breakPorts, if set, changes a task's ports: a test breaks the
	// engine's world with it to show that the checks catch what follows.
	breakPorts func(*task, Ports) Ports

	sb     *sandbox.Server
	client *serper.Client
	store  *memstore.Store

	wake chan struct{} // a task parked or finished

	mu       sync.Mutex // guards what tasks touch: the queue, the tasks, the records
	q        *queue
	workers  []*simWorker
	tasks    map[int]*task
	nextTask int
	late     []lateAck
	cmds     []*command
	sends    map[string][]send // each key's requests
	calm     bool              // faults have stopped
	rep      *Report
}

// send is one request of a key: when the engine handed it to the API
// client (after its last check) and when it left (after any pause).
type send struct{ handed, left time.Time }

type lateAck struct {
	at time.Time
	m  *message
}

// Run runs cfg in a synctest bubble of t and returns its report; the
// report's Failures say which promises broke. newStepper may be nil.
func Run(t *testing.T, cfg Config, newStepper func(Ports) Stepper) *Report {
	t.Helper()
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		w, err := newWorld(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.NewStepper = newStepper
		rep = w.run()
	})
	return rep
}

func newWorld(cfg Config) (*World, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sbCfg := cfg.Sandbox
	sbCfg.Now, sbCfg.Token, sbCfg.Logger = time.Now, sandbox.DefaultToken, slog.New(slog.DiscardHandler)
	sb := sandbox.New(sbCfg)
	client, err := serper.New(serper.Config{BaseURL: "http://sandbox.sim", Token: sandbox.DefaultToken,
		Timeout: cfg.ClientTimeout, AllowShortTimeout: true, Transport: inProcess{sb}})
	if err != nil {
		return nil, err
	}
	w := &World{
		cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5c4ed)), start: time.Now(),
		sb: sb, client: client, store: memstore.New(memstore.Options{}),
		wake: make(chan struct{}, 1), q: newQueue(cfg.ServerAhead), tasks: map[int]*task{},
		sends: map[string][]send{}, rep: newReport(cfg),
	}
	for i := range cfg.Workers {
		w.workers = append(w.workers, &simWorker{n: i + 1, incarnation: 1, name: workerName(i+1, 1)})
	}
	w.cmds = commands(cfg, w.start)
	for _, c := range w.cmds {
		w.q.publishCommand(c)
	}
	return w, nil
}

// run is the scheduler: until nothing is left to do, wait for every task to
// park, then pick one thing to happen next.
func (w *World) run() *Report {
	faultsEnd := w.start.Add(w.cfg.FaultsFor)
	horizon := faultsEnd.Add(w.cfg.Settle)
	var last time.Time
	still := 0 // turns since fake time last moved
	for {
		synctest.Wait()
		now := time.Now()
		if now.Equal(last) {
			still++
		} else {
			last, still = now, 0
		}
		if still > w.stillLimit() {
			w.rep.fail("livelock: %d scheduler turns at %s and time does not move (a wake-up handed to a worker again and again?)",
				still, now.Sub(w.start))
			break
		}
		if !w.calm && !now.Before(faultsEnd) {
			w.calm = true
			w.sb.SetFaults(sandbox.Faults{})
		}
		if !now.Before(horizon) {
			w.rep.HitHorizon = true
			break
		}
		act, sleep, idle := w.choose(now)
		if idle {
			break
		}
		if act != nil {
			act()
			continue
		}
		w.sleep(now, sleep, faultsEnd, horizon)
	}
	w.stop()
	w.check()
	return w.rep
}

// stillLimit is how many turns the scheduler takes at one instant before
// it calls the world stuck: every task and message of a world, many times
// over (a default world takes a few thousand at its busiest instant).
func (w *World) stillLimit() int { return max(100_000, 200*len(w.cmds)) }

// choose picks the next thing to happen at now, or says how long nothing
// can (zero: until a task wakes up by itself), or that the world is idle.
func (w *World) choose(now time.Time) (act func(), until time.Time, idle bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.q.fire(now)
	for _, wk := range w.workers {
		if !wk.downUntil.IsZero() && !now.Before(wk.downUntil) {
			wk.downUntil = time.Time{}
			w.rep.Restarts++
		}
	}
	w.late = slices.DeleteFunc(w.late, func(l lateAck) bool {
		if now.Before(l.at) {
			return false
		}
		w.q.ack(l.m)
		return true
	})

	var acts []func()
	for _, id := range w.taskIDs() {
		t := w.tasks[id]
		if t.parked && !t.worker.paused(now) {
			acts = append(acts, func() { w.step(t, now) })
		}
	}
	if m := next(&w.q.due, now); m != nil && w.freeWorker(now, false) != nil {
		acts = append(acts, func() { w.deliver(m, now) })
	}
	if m := next(&w.q.cmds, now); m != nil && w.freeWorker(now, true) != nil {
		acts = append(acts, func() { w.deliver(m, now) })
	}
	if len(acts) > 0 {
		return acts[w.rng.IntN(len(acts))], time.Time{}, false
	}
	// Nothing can happen now: find the next time something will.
	until = w.q.nextEvent()
	later := func(t time.Time) {
		if t.After(now) && (until.IsZero() || t.Before(until)) {
			until = t
		}
	}
	if !until.After(now) {
		until = time.Time{}
	}
	for _, wk := range w.workers {
		later(wk.downUntil)
		later(wk.pausedUntil)
	}
	for _, l := range w.late {
		later(l.at)
	}
	return nil, until, until.IsZero() && len(w.tasks) == 0
}

// sleep lets fake time pass until until (or a task parks by itself).
func (w *World) sleep(now, until, faultsEnd, horizon time.Time) {
	if !w.calm && (until.IsZero() || faultsEnd.Before(until)) {
		until = faultsEnd
	}
	if until.IsZero() || horizon.Before(until) {
		until = horizon
	}
	tm := time.NewTimer(until.Sub(now))
	defer tm.Stop()
	select {
	case <-w.wake:
	case <-tm.C:
	}
}

// step resumes a parked task with a verdict drawn for its point.
func (w *World) step(t *task, now time.Time) {
	w.rep.Steps++
	v, hold := w.verdict(t, now)
	if w.cfg.Trace != "" && t.msg.job == w.cfg.Trace {
		what := verdictNames[v]
		if hold {
			what = "paused until " + t.worker.pausedUntil.Sub(w.start).String()
		}
		w.rep.trace(now.Sub(w.start), "task %d (%s, delivery %d) at %s: %s", t.id, t.worker.name, t.msg.deliveries, t.point, what)
	}
	if hold {
		return
	}
	w.resumeTask(t, v)
}

// stop ends every task still running (the world reached its horizon) and
// closes the sandbox.
func (w *World) stop() {
	for {
		synctest.Wait()
		w.mu.Lock()
		var parked []*task
		for _, id := range w.taskIDs() {
			t := w.tasks[id]
			if !t.dead {
				t.dead = true
				t.cancel()
			}
			if t.parked {
				t.parked = false
				parked = append(parked, t)
			}
		}
		n := len(w.tasks)
		w.mu.Unlock()
		if n == 0 {
			break
		}
		for _, t := range parked {
			t.resume <- vDead
		}
		if len(parked) == 0 {
			// Tasks blocked inside a request end with their context.
			tm := time.NewTimer(time.Second)
			select {
			case <-w.wake:
			case <-tm.C:
			}
			tm.Stop()
		}
	}
	_ = w.sb.Close()
	w.client.CloseIdleConnections()
}

// recordSend notes when a request of key was handed over and left.
func (w *World) recordSend(key string, handed, left time.Time) {
	w.mu.Lock()
	w.sends[key] = append(w.sends[key], send{handed, left})
	w.rep.Sends++
	w.mu.Unlock()
}

// taskIDs lists the live tasks in a fixed order. w.mu is held.
func (w *World) taskIDs() []int {
	ids := make([]int, 0, len(w.tasks))
	for id := range w.tasks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// workerName names a worker process: its number and its incarnation.
func workerName(n, incarnation int) string {
	return "w" + strconv.Itoa(n) + "." + strconv.Itoa(incarnation)
}
