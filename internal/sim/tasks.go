package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/consume"
)

// settlement is how a task settles its delivery.
type settlement int

const (
	ack settlement = iota
	nak
	term
)

// handleWork is one delivery of a due job, handled as the engine's work
// consumer handles it: engine.Engine.HandleWork, with the delivery as an
// engine.Msg (simMsg). A pluggable Stepper (the naive comparison) is
// not an engine: it is stepped as the engine used to be (stepWith).
func (w *World) handleWork(t *task, m *simMsg) {
	defer w.finish(t)
	p := w.ports(t)
	if w.NewStepper != nil {
		w.stepWith(w.NewStepper(p), t, m, p)
		return
	}
	w.engine(t, p).HandleWork(t.ctx, t.msg.job, m)
}

// stepWith handles a delivery of a due job with a Stepper that is not the
// engine: step the job; on a wait, arm its timer, then acknowledge; on an
// error, ask for redelivery; on a crash, nothing (the ack wait brings it
// back).
func (w *World) stepWith(st Stepper, t *task, m *simMsg, p Ports) {
	next, err := st.Step(t.ctx, t.msg.job, func() { _ = m.InProgress() })
	switch {
	case w.isDead(t) || errors.Is(err, engine.ErrCrash):
	case errors.Is(err, engine.ErrNoSuchJob):
		_ = m.Term()
	case err != nil:
		_ = m.NakWithDelay(w.cfg.RetryDelay)
	case next.Step == aggregate.StepWait:
		if err := p.Timers.Arm(t.ctx, t.msg.job, next.At); err != nil {
			_ = m.NakWithDelay(w.cfg.RetryDelay)
			return
		}
		_ = m.Ack()
	default:
		_ = m.Ack()
	}
}

// handleCommand is one delivery of a command, handled as the engine's
// intake handles it: engine.Engine.HandleCommand (consume.HandleStray
// for a subject the intake does not read), with the delivery as an
// engine.Msg and SERP_REJECTED as the task's taskRejections. With a
// pluggable Stepper the command only becomes a job (scheduleWith): the
// naive worker does the rest.
func (w *World) handleCommand(t *task, m *simMsg) {
	defer w.finish(t)
	eng := w.engine(t, w.ports(t))
	if w.NewStepper != nil {
		w.scheduleWith(eng, t, m)
		return
	}
	if m.Subject() != snats.ScheduleSubject {
		// Not the intake's (it reads serp.cmd.schedule alone): the
		// serpent-strays consumer's.
		consume.HandleStray(t.ctx, eng, taskRejections{w, t}, m)
		return
	}
	eng.HandleCommand(t.ctx, taskRejections{w, t}, m)
}

// scheduleWith makes t's command a job with engine.Engine.Schedule (which
// arms the job's timer and goes no further), or records its rejection, and
// settles the delivery.
func (w *World) scheduleWith(eng *engine.Engine, t *task, m *simMsg) {
	var err error = &engine.RejectError{Reason: engine.ReasonUnknownSubject}
	if m.Subject() == snats.ScheduleSubject {
		_, err = eng.Schedule(t.ctx, m.Data(), fmt.Sprintf("%s:%d", m.stream(), t.msg.seq))
	}
	var rej *engine.RejectError
	switch {
	case w.isDead(t) || errors.Is(err, engine.ErrCrash):
	case errors.As(err, &rej):
		if err := w.recordRejection(t, rej.Reason); err != nil {
			_ = m.NakWithDelay(w.cfg.RetryDelay)
			return
		}
		_ = m.Ack()
	case err != nil:
		_ = m.NakWithDelay(w.cfg.RetryDelay)
	default:
		_ = m.Ack()
	}
}

// settle acknowledges, negatively acknowledges (to come back after delay)
// or terminates t's delivery, unless the scheduler loses or delays the
// acknowledgement. It reports false if t's process died first.
func (w *World) settle(t *task, how settlement, delay time.Duration) bool {
	w.mu.Lock()
	t.how = how
	w.mu.Unlock()
	v := w.yield(t, ptAck)
	if v == vDead {
		return false
	}
	if v == vLost || v == vLate {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch how {
	case ack, term:
		w.q.ack(t.msg)
	case nak:
		w.rep.Naks++
		w.q.nak(t.msg, time.Now(), delay)
	}
	return true
}

// engine is the real engine for one task: its worker's name, the task's
// ports and hooks, ids of its own.
func (w *World) engine(t *task, p Ports) *engine.Engine {
	eng, err := engine.New(engine.Config{
		Name: p.Name, Store: p.Store, API: p.API, Timers: p.Timers, Hooks: p.Hooks,
		Policy: w.cfg.Policy, Now: time.Now, IDs: p.IDs, RetryDelay: w.cfg.RetryDelay,
		Retention: w.cfg.Retention, SkewMargin: w.cfg.SkewMargin,
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
