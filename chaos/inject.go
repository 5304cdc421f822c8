package chaos

import (
	"context"
	"math"
	"time"
)

// inject is the chaos: until ctx ends, at random moments (exponential
// gaps around the configured means) it kills a worker with SIGKILL (its
// supervisor restarts it), freezes one with SIGSTOP past its lease, or
// restarts the NATS server (SIGKILL or SIGTERM, then start it again on the
// same port and data).
func (r *run) inject(ctx context.Context) {
	c := r.cfg
	next := func(mean time.Duration) time.Time {
		if mean <= 0 {
			return time.Time{}
		}
		r.mu.Lock()
		gap := -math.Log(1-r.rng.Float64()) * float64(mean)
		r.mu.Unlock()
		return time.Now().Add(time.Duration(gap))
	}
	due := func(t time.Time) bool { return !t.IsZero() && time.Now().After(t) }
	kill, pause, restart := next(c.KillEvery), next(c.PauseEvery), next(c.NATSRestartEvery)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		switch {
		case due(kill):
			r.killWorker()
			kill = next(c.KillEvery)
		case due(pause):
			r.pauseWorker(ctx)
			pause = next(c.PauseEvery)
		case due(restart):
			r.restartNATS(ctx)
			restart = next(c.NATSRestartEvery)
		}
	}
}

// liveWorker picks a running, unpaused worker, or nil. r.mu is held.
func (r *run) liveWorker() *workerSlot {
	var live []*workerSlot
	for _, w := range r.workers {
		if w.proc != nil && !w.proc.exited() && !w.proc.isPaused() {
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return nil
	}
	return live[r.rng.IntN(len(live))]
}

func (r *run) killWorker() {
	r.mu.Lock()
	w := r.liveWorker()
	if w == nil {
		r.mu.Unlock()
		return
	}
	w.killed = true
	p := w.proc
	r.rep.WorkerKills++
	r.mu.Unlock()
	r.say("SIGKILL %s", w.name)
	p.kill()
}

// pauseWorker freezes a worker for longer than its lease, in the
// background; calm thaws whatever is still frozen.
func (r *run) pauseWorker(ctx context.Context) {
	r.mu.Lock()
	w := r.liveWorker()
	if w == nil {
		r.mu.Unlock()
		return
	}
	c := r.cfg
	d := c.PauseMin + time.Duration(r.rng.Int64N(int64(c.PauseMax-c.PauseMin)+1))
	p := w.proc
	r.rep.Pauses++
	r.mu.Unlock()
	if err := p.pause(); err != nil {
		return
	}
	r.say("SIGSTOP %s for %s (lease %s)", w.name, d.Round(time.Millisecond), c.Lease)
	go func() {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		case <-p.done:
		}
		p.resume()
	}()
}

// restartNATS stops the NATS server, hard or gently, and starts it again.
func (r *run) restartNATS(ctx context.Context) {
	r.mu.Lock()
	hard := r.rng.IntN(2) == 0
	down := 300*time.Millisecond + time.Duration(r.rng.Int64N(int64(1500*time.Millisecond)))
	p := r.nats
	r.mu.Unlock()
	if hard {
		r.say("SIGKILL the NATS server; back in %s", down.Round(time.Millisecond))
		p.kill()
		r.mu.Lock()
		r.rep.NATSKills++
		r.mu.Unlock()
	} else {
		r.say("SIGTERM the NATS server; back in %s", down.Round(time.Millisecond))
		p.stop(20 * time.Second)
		r.mu.Lock()
		r.rep.NATSStops++
		r.mu.Unlock()
	}
	time.Sleep(down)
	for {
		err := r.startNATS(context.WithoutCancel(ctx))
		if err == nil {
			return
		}
		r.say("NATS server did not come back: %v; trying again", err)
		time.Sleep(time.Second)
	}
}

// calm ends the chaos: every frozen worker is thawed; killed ones come
// back through their supervisors.
func (r *run) calm() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.workers {
		if w.proc != nil {
			w.proc.resume()
		}
	}
}
