package engine

import (
	"context"
	"errors"
	"time"
)

// Limits of handing a delivery back instead of arming a timer.
const (
	// maxHoldDelay is the longest wait a delivery is handed back for.
	maxHoldDelay = 10 * time.Second
	// maxHeld bounds the deliveries one process hands back at once: each
	// counts against the work consumer's MaxAckPending (10,000) while it
	// waits, and a backlog held there would keep other accounts' work
	// from being delivered.
	maxHeld = 1000
)

// hold hands a delivery back to the queue, to be delivered again after d,
// when the wait is short and few are held: a wait on a paused or limited
// account then writes nothing, where a timer writes its schedule and
// then the wake-up. It reports whether it did.
func (e *Engine) hold(msg Msg, d time.Duration) bool {
	if d <= 0 || d > maxHoldDelay {
		return false
	}
	if e.held.Add(1) > maxHeld {
		e.held.Add(-1)
		return false
	}
	if err := msg.NakWithDelay(d); err != nil {
		e.held.Add(-1)
		return false
	}
	time.AfterFunc(d, func() { e.held.Add(-1) })
	return true
}

// Held is the number of work deliveries this process has handed back to
// wait out a throttle and whose delay has not run out yet.
func (e *Engine) Held() int { return int(e.held.Load()) }

// HandleWork steps a job for one delivery of its wake-up and settles the
// delivery: acknowledged once the job is done or its timer armed, handed
// back with a delay to wait out a short throttle (or an early wake-up),
// asked again after Config.RetryDelay when the step failed, terminated
// when the job does not exist, left alone when a test hook played a
// crash. The work consumer's loop (package nats) calls it for every
// delivery; the simulation (internal/sim) calls it with its own messages,
// so both run this code.
func (e *Engine) HandleWork(ctx context.Context, jobID string, msg Msg) {
	var woke time.Time
	if info, err := msg.Info(); err == nil {
		woke = info.Stored
	}
	held := false
	err := e.settle(ctx, jobID, known{}, func() { _ = msg.InProgress() }, func(d time.Duration) bool {
		held = e.hold(msg, d)
		return held
	}, woke)
	if held {
		return // handed back (settle stopped there): it comes again when the wait is over
	}
	switch {
	case errors.Is(err, ErrNoSuchJob):
		e.log.Warn("wake-up for a job that does not exist", "job", jobID)
		_ = msg.Term()
		return
	case errors.Is(err, ErrCrash):
		return // a test plays a crash: leave the delivery unacknowledged
	case err != nil:
		e.log.Warn("step failed; the job will be tried again", "job", jobID, "err", err)
		_ = msg.NakWithDelay(e.cfg.RetryDelay)
		return
	}
	_ = msg.Ack()
}
