package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Limits of holding a delivery back instead of arming a timer.
const (
	// maxHoldDelay is the longest wait a delivery is handed back for.
	maxHoldDelay = 10 * time.Second
	// maxHeld bounds the deliveries of one consumer one process hands
	// back at once: each counts against its consumer's MaxAckPending
	// (10,000) while it waits, and a backlog held there would keep other
	// accounts' work, or commands, from being delivered.
	maxHeld = 1000
)

// holds counts the deliveries of one consumer this process holds back.
type holds struct {
	handed atomic.Int32 // handed back with a delay that has not run out
	parked atomic.Int32 // parked while their account is paused (park)
}

func (h *holds) count() int { return int(h.handed.Load() + h.parked.Load()) }

// handBack hands a delivery back to its consumer, to be delivered again
// after d, when the wait is short and few are handed back (held counts
// them). A wait on a limited account then writes nothing, where a timer
// writes its schedule and then the wake-up. It reports whether it did.
func handBack(held *atomic.Int32, msg Msg, d time.Duration) bool {
	if d <= 0 || d > maxHoldDelay {
		return false
	}
	if held.Add(1) > maxHeld {
		held.Add(-1)
		return false
	}
	if err := msg.NakWithDelay(d); err != nil {
		held.Add(-1)
		return false
	}
	time.AfterFunc(d, func() { held.Add(-1) })
	return true
}

// holdBack keeps a delivery whose job its account holds back for d (te
// says why; nil for an early wake-up) without arming a timer, and reports
// whether it did: parked with the account's other jobs while the account
// is paused (park), or else handed back to its consumer with that delay.
// h counts the deliveries of its consumer held back.
func (e *Engine) holdBack(ctx context.Context, h *holds, jobID string, msg Msg, te *ThrottledError, d time.Duration) bool {
	if te != nil && te.Reason == WaitPaused && e.park(ctx, h, te.Account, jobID, msg, te.For) {
		return true
	}
	return handBack(&h.handed, msg, d)
}

// Held is the number of work deliveries this process holds back to wait
// out a throttle, parked or handed back with a delay that has not run out.
func (e *Engine) Held() int { return e.work.count() }

// HeldCommands is the same for schedule commands whose new job waits.
func (e *Engine) HeldCommands() int { return e.commands.count() }

// HandleWork steps a job for one delivery of its wake-up and settles the
// delivery: acknowledged once the job is done or its timer armed, held
// back to wait out a short throttle (or an early wake-up), asked again
// after Config.RetryDelay when the step failed, terminated when the job
// does not exist, left alone when a test hook played a crash. The work
// consumer's loop (package nats) calls it for every delivery; the
// simulation (internal/sim) calls it with its own messages, so both run
// this code.
func (e *Engine) HandleWork(ctx context.Context, jobID string, msg Msg) {
	var woke time.Time
	if info, err := msg.Info(); err == nil {
		woke = info.Stored
	}
	e.resume(ctx, &e.work, jobID, msg, woke)
}

// resume steps a job for a delivery that wakes it (a wake-up, or a parked
// command whose job's account may go on) and settles the delivery as
// HandleWork says. h counts the deliveries of its consumer held back.
func (e *Engine) resume(ctx context.Context, h *holds, jobID string, msg Msg, woke time.Time) {
	waiting := false
	err := e.settle(ctx, jobID, known{}, func() { _ = msg.InProgress() }, func(te *ThrottledError, d time.Duration) bool {
		waiting = e.holdBack(ctx, h, jobID, msg, te, d)
		return waiting
	}, woke)
	if waiting {
		return // parked or handed back (settle stopped there): it goes on when the wait is over
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
