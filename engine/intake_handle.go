package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
)

// HandleCommand handles one delivery of a schedule command: it becomes a
// job, taken as far as it goes now (its timer armed if it must wait)
// while the command is held, or a rejection recorded with rec. The
// command is acknowledged once that is durable, asked again a second
// later if it failed, and left alone when a test hook played a crash. A
// new job its account's pause holds back keeps its command instead of a
// timer (park): the job goes on from the log when the pause is over, and
// its command is settled then. The
// intake's loop (package nats) calls it for every delivery; the
// simulation (internal/sim) calls it with its own messages and rejection
// records, so both run this code.
func (e *Engine) HandleCommand(ctx context.Context, rec Rejections, msg Msg) {
	info, err := msg.Info()
	if err != nil {
		e.log.Warn("command without its place in a stream", "err", err)
		_ = msg.Term()
		return
	}
	source := fmt.Sprintf("%s:%d", info.Stream, info.Seq)
	out, k, err := e.schedule(ctx, msg.Data(), source, true)
	waiting := false
	if err == nil {
		// Take the job as far as it goes now, holding the command: if this
		// process dies, the command comes back and the job with it.
		err = e.settle(ctx, out.JobID, k, func() { _ = msg.InProgress() }, func(te *ThrottledError, _ time.Duration) bool {
			// Only a pause parks the command. Handed back, it would come
			// again with the job's first events to store, and ask its
			// account twice: its first permit would be spent on a
			// write the stored job refuses.
			waiting = te != nil && te.Reason == WaitPaused && e.park(ctx, &e.commands, te.Account, out.JobID, msg, te.For)
			return waiting
		}, time.Time{})
	}
	if waiting {
		return // parked (settle stopped there): it goes on when the pause is over
	}
	var rej *RejectError
	switch {
	case errors.Is(err, ErrCrash):
		// a test plays a crash: leave the command unacknowledged
	case errors.As(err, &rej):
		e.Refuse(ctx, rec, msg, rej)
	case err != nil:
		e.log.Warn("scheduling failed; the command will be tried again", "seq", info.Seq, "err", err)
		_ = msg.NakWithDelay(time.Second)
	default:
		e.log.Debug("command scheduled", "seq", info.Seq, "job", out.JobID, "created", out.Created)
		_ = msg.Ack()
	}
}

// Refuse records the command of a delivery as refused, for the reason
// rej gives, and settles the delivery: acknowledged once the record is
// durable, asked again a second later if recording it failed.
func (e *Engine) Refuse(ctx context.Context, rec Rejections, msg Msg, rej *RejectError) {
	info, err := msg.Info()
	if err != nil {
		e.log.Warn("command without its place in a stream", "err", err)
		_ = msg.Term()
		return
	}
	r := Rejection{Subject: msg.Subject(), Seq: info.Seq, Payload: msg.Data(), Reason: rej.Reason, Error: rej.Msg, Fields: rej.Fields}
	if err := rec.Reject(ctx, r); err != nil {
		e.log.Warn("recording a rejection failed; the command will be tried again", "seq", info.Seq, "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	e.log.Info("command rejected", "seq", info.Seq, "subject", r.Subject, "reason", rej.Reason, "err", rej.Msg)
	_ = msg.Ack()
}

// settle steps a job and arms its timer if it must wait. hold, if not
// nil, is offered a wait its account imposes (a pause, a limit; te says
// which) first: when it takes the wait, no timer is armed. woke is the
// server's time when the timer that woke the job fired (zero when no
// timer did).
func (e *Engine) settle(ctx context.Context, jobID string, k known, keepAlive func(), hold func(te *ThrottledError, d time.Duration) bool, woke time.Time) error {
	next, throttle, err := e.step(ctx, jobID, k, keepAlive)
	if err != nil {
		return err
	}
	if next.Step != aggregate.StepWait {
		return nil
	}
	// skew is how far the server's clock, which fires timers, is ahead of
	// this engine's at least: it stored the wake-up at woke. A timer armed
	// for next.At would fire that much early, at once if the server is
	// past it already, and again until this clock got there.
	at, now := next.At, e.cfg.Now()
	skew := max(woke.Sub(now), 0)
	if hold != nil && (throttle != nil || skew > 0 && !at.After(woke)) && hold(throttle, at.Sub(now)) {
		return nil
	}
	at = at.Add(skew)
	if err := e.cfg.Timers.Arm(ctx, jobID, at); err != nil {
		return fmt.Errorf("job %s: arm timer: %w", jobID, err)
	}
	return nil
}
