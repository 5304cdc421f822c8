package sim

import (
	"context"
	"time"
)

// point is where a task hands control back to the scheduler: every place
// where another task's step, a crash, a pause or a fault can change what
// happens next.
type point int

const (
	ptLoad     point = iota // before reading a job's log
	ptAppend                // before an append is written
	ptAppended              // after an append was written, before its reply
	ptSend                  // after the engine's last check, before the request leaves
	ptReply                 // after the reply arrived, before the engine sees it
	ptLedger                // before a billing ledger look-up
	ptHook                  // an engine crash hook (engine.Hooks)
	ptArm                   // before arming a timer
	ptReject                // before recording a rejected command
	ptAck                   // before settling the delivery
	numPoints
)

var pointNames = [numPoints]string{"load", "append", "appended", "send", "reply", "ledger", "hook", "arm", "reject", "ack"}

func (p point) String() string { return pointNames[p] }

// verdict is the scheduler's answer at a point.
type verdict int

const (
	vGo   verdict = iota // carry on
	vFail                // the operation fails, nothing happens (store, ledger, timer unreachable)
	vLost                // the operation happened, its reply is lost (append, ack)
	vLate                // the acknowledgement arrives late
	vDead                // the process died: nothing more of this task happens
)

// task is one delivery (or command) being handled by one worker process,
// in its own goroutine. It runs only between a resume and its next yield,
// so the scheduler alone decides the order of everything that matters.
type task struct {
	id     int
	worker *simWorker
	msg    *message
	ctx    context.Context
	cancel context.CancelFunc
	resume chan verdict

	// Guarded by the world's mutex.
	point    point
	how      settlement    // at ptAck
	cutAfter time.Duration // at ptSend with vLost
	parked   bool
	dead     bool
	done     bool
}

// simWorker is one worker process. A crash ends every task it runs and
// brings it back, empty, after a while; a pause freezes it.
type simWorker struct {
	n           int
	incarnation int
	name        string
	downUntil   time.Time // zero while up
	pausedUntil time.Time
	work, cmds  int // deliveries it handles now
}

func (w *simWorker) up() bool { return w.downUntil.IsZero() }

func (w *simWorker) paused(now time.Time) bool { return now.Before(w.pausedUntil) }

// yield parks t at p until the scheduler resumes it, and returns the
// scheduler's verdict. A dead task does not park: it learns at once.
func (w *World) yield(t *task, p point) verdict {
	w.mu.Lock()
	if t.dead {
		w.mu.Unlock()
		return vDead
	}
	t.point, t.parked = p, true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return <-t.resume
}

// resumeTask lets a parked task go on with v. The scheduler holds no lock.
func (w *World) resumeTask(t *task, v verdict) {
	w.mu.Lock()
	t.parked = false
	w.mu.Unlock()
	t.resume <- v
}
