package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/worker"
)

// settlement is how a task settles its delivery.
type settlement int

const (
	ack settlement = iota
	nak
	term
)

// handleWork is one delivery of a due job, as worker.Engine.Run handles
// it: step the job; on a wait, arm its timer, then acknowledge; on an
// error, ask for redelivery; on a crash, nothing (the ack wait brings it
// back).
func (w *World) handleWork(t *task, lostKeepAlive bool) {
	defer w.finish(t)
	p := w.ports(t)
	var st Stepper
	if w.NewStepper != nil {
		st = w.NewStepper(p)
	} else {
		st = w.engine(t, p)
	}
	keepAlive := func() {
		if lostKeepAlive {
			return
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		if now := time.Now(); !t.dead && !t.worker.paused(now) {
			w.q.keepAlive(t.msg, now, w.cfg.AckWait)
		}
	}
	next, err := st.Step(t.ctx, t.msg.job, keepAlive)
	switch {
	case w.isDead(t) || errors.Is(err, worker.ErrCrash):
		return
	case errors.Is(err, worker.ErrNoSuchJob):
		w.settle(t, term)
	case err != nil:
		w.count(&w.rep.StepErrors)
		w.settle(t, nak)
	case next.Step == aggregate.StepWait:
		if err := p.Timers.Arm(t.ctx, t.msg.job, next.At); err != nil {
			if !w.isDead(t) {
				w.settle(t, nak)
			}
			return
		}
		w.settle(t, ack)
	default:
		w.settle(t, ack)
	}
}

// handleCommand is one delivery of a schedule command, as the engine's
// intake handles it: a job, or a recorded rejection, then the ack.
func (w *World) handleCommand(t *task) {
	defer w.finish(t)
	eng := w.engine(t, w.ports(t))
	c := t.msg.cmd
	out, err := eng.Schedule(t.ctx, c.payload, fmt.Sprintf("SERP_COMMANDS:%d", t.msg.seq))
	var rej *worker.RejectError
	switch {
	case w.isDead(t) || errors.Is(err, worker.ErrCrash):
		return
	case errors.As(err, &rej):
		switch w.yield(t, ptReject) {
		case vDead:
			return
		case vFail:
			w.settle(t, nak)
			return
		}
		w.mu.Lock()
		c.rejected = rej.Reason // one record per command: its sequence is the record's message id
		w.mu.Unlock()
		w.settle(t, ack)
	case err != nil:
		w.settle(t, nak)
	default:
		w.mu.Lock()
		c.scheduled = out.JobID
		w.mu.Unlock()
		w.settle(t, ack)
	}
}

// settle acknowledges, negatively acknowledges or terminates t's delivery,
// unless the scheduler loses or delays the acknowledgement.
func (w *World) settle(t *task, how settlement) {
	w.mu.Lock()
	t.how = how
	w.mu.Unlock()
	v := w.yield(t, ptAck)
	if v == vDead || v == vLost || v == vLate {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch how {
	case ack, term:
		w.q.ack(t.msg)
	case nak:
		w.q.nak(t.msg, time.Now(), w.cfg.RetryDelay)
	}
}

// engine is the real engine for one task: its worker's name, the task's
// ports and hooks, ids of its own.
func (w *World) engine(t *task, p Ports) *worker.Engine {
	eng, err := worker.New(worker.Config{
		Name: p.Name, Store: p.Store, API: p.API, Timers: p.Timers, Hooks: p.Hooks,
		Policy: w.cfg.Policy, Now: time.Now, IDs: p.IDs,
	})
	if err != nil {
		panic(err) // the config was validated
	}
	return eng
}

func (w *World) isDead(t *task) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return t.dead
}

func (w *World) count(n *int) {
	w.mu.Lock()
	*n++
	w.mu.Unlock()
}
