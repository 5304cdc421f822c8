package sim

import (
	"context"
	"time"
)

// freeWorker returns a live, running worker with a free slot, chosen by
// the scheduler, or nil. w.mu is held.
func (w *World) freeWorker(now time.Time, intake bool) *simWorker {
	var free []*simWorker
	for _, wk := range w.workers {
		if !wk.up() || wk.paused(now) {
			continue
		}
		if (intake && wk.cmds < w.cfg.IntakeSlots) || (!intake && wk.work < w.cfg.Slots) {
			free = append(free, wk)
		}
	}
	if len(free) == 0 {
		return nil
	}
	return free[w.rng.IntN(len(free))]
}

// deliver hands a message to a worker (sometimes to two at once) and
// starts the task that handles it.
func (w *World) deliver(m *message, now time.Time) {
	intake := m.cmd != nil
	w.mu.Lock()
	wk := w.freeWorker(now, intake)
	if m.deliveries > 0 {
		w.rep.Redeliveries++
	}
	w.q.deliver(m, now, w.cfg.AckWait)
	for _, t := range w.tasks {
		if t.msg.job != "" && t.msg.job == m.job && !t.dead {
			w.rep.ConcurrentDeliveries++
			break
		}
	}
	targets := []*simWorker{wk}
	if !w.calm && w.rng.Float64() < w.cfg.Faults.Duplicate {
		if wk2 := w.freeWorker(now, intake); wk2 != nil {
			targets = append(targets, wk2)
			w.rep.DuplicateDeliveries++
		}
	}
	lostKA := !w.calm && w.rng.Float64() < w.cfg.Faults.KeepAliveLost
	var started []*simMsg
	for _, wk := range targets {
		t := w.newTask(wk, m, intake)
		started = append(started, &simMsg{w: w, t: t, delivered: uint64(m.deliveries), lostKeepAlive: lostKA})
	}
	w.rep.Deliveries += len(targets)
	w.mu.Unlock()
	for _, sm := range started {
		if intake {
			go w.handleCommand(sm.t, sm)
		} else {
			go w.handleWork(sm.t, sm)
		}
	}
}

// newTask registers a task of wk for m. w.mu is held.
func (w *World) newTask(wk *simWorker, m *message, intake bool) *task {
	w.nextTask++
	ctx, cancel := context.WithCancel(context.Background())
	t := &task{id: w.nextTask, worker: wk, msg: m, ctx: ctx, cancel: cancel, resume: make(chan verdict)}
	w.tasks[t.id] = t
	if intake {
		wk.cmds++
	} else {
		wk.work++
	}
	return t
}

// finish unregisters a task whose goroutine ends.
func (w *World) finish(t *task) {
	w.mu.Lock()
	t.done = true
	t.cancel()
	delete(w.tasks, t.id)
	if !t.dead {
		if t.msg.cmd != nil {
			t.worker.cmds--
		} else {
			t.worker.work--
		}
	}
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}
