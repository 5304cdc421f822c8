package engine

import (
	"context"
	"time"
)

// A paused account's jobs wait in a lot of this process (park): their
// deliveries (wake-ups, or the commands of new jobs) stay with it,
// unacknowledged and kept alive, and one timer per account wakes the lot
// when the pause ends. Nothing is written for them, and they do not come
// back one by one while the pause lasts. When it ends the lot lets its
// jobs go oldest first, releaseAtOnce at a time, and stops as soon as the
// account is paused again (an answer of 429 to one of them): the others
// wait for that pause to end, without asking in vain. A process that dies
// leaves the deliveries unacknowledged, and their consumer hands them to
// another worker, or to the process started again, after its ack wait.

// Limits of parking.
const (
	// releaseAtOnce is how many jobs of a lot go on at once when its
	// account's pause ends: as many as the engine's default workers.
	releaseAtOnce = 512
	// maxParked bounds the deliveries of one consumer one process parks:
	// half its MaxAckPending (10,000), which leaves the other half to
	// other accounts' work. A job that finds no room arms its timer.
	maxParked = 5000
)

// lot is the jobs one account's pause holds in this process.
type lot struct {
	queue   []parked // oldest first
	running int      // released and not done yet
	wake    *time.Timer
	wakeAt  time.Time
	alive   *time.Timer   // keeps the queued deliveries alive
	every   time.Duration // how often: within the shortest ack wait
}

// parked is one delivery waiting in a lot.
type parked struct {
	ctx   context.Context // the consumer loop's: once it ends, the delivery goes back
	h     *holds          // counts its consumer's deliveries held back
	jobID string
	msg   Msg
}

// park puts a delivery in its paused account's lot, to go on when the
// pause ends (in pause), and reports whether it did: not when its
// consumer has maxParked deliveries parked already.
func (e *Engine) park(ctx context.Context, h *holds, acct, jobID string, msg Msg, pause time.Duration) bool {
	if e.cfg.Limiter == nil || pause <= 0 {
		return false
	}
	if h.parked.Add(1) > maxParked {
		h.parked.Add(-1)
		return false
	}
	e.parkMu.Lock()
	defer e.parkMu.Unlock()
	l := e.lots[acct]
	if l == nil {
		l = &lot{}
		e.lots[acct] = l
	}
	l.queue = append(l.queue, parked{ctx: ctx, h: h, jobID: jobID, msg: msg})
	every := keepAliveEvery
	if info, err := msg.Info(); err == nil && info.AckWait > 0 {
		every = min(every, info.AckWait/3)
	}
	switch {
	case l.alive == nil:
		l.every = every
		l.alive = time.AfterFunc(every, func() { e.keepParked(acct) })
	case every < l.every:
		l.every = every
		l.alive.Reset(every)
	}
	if l.running == 0 {
		e.wakeLocked(acct, l, pause)
	}
	return true
}

// wakeLocked arms the lot's one timer to fire in d, unless it is armed
// to fire sooner already. e.parkMu is held.
func (e *Engine) wakeLocked(acct string, l *lot, d time.Duration) {
	now := time.Now()
	at := now.Add(d)
	if l.wake != nil && l.wakeAt.After(now) && !l.wakeAt.After(at) {
		return
	}
	if l.wake != nil {
		l.wake.Stop()
	}
	l.wake, l.wakeAt = time.AfterFunc(d, func() { e.release(acct) }), at
}

// release lets a lot's jobs go on, releaseAtOnce at a time, while the
// account is not paused; the timer calls it when the pause ends, and each
// released job once it is done.
func (e *Engine) release(acct string) {
	e.parkMu.Lock()
	defer e.parkMu.Unlock()
	l := e.lots[acct]
	if l == nil {
		return
	}
	if d := e.cfg.Limiter.pausedFor(acct); d > 0 {
		if l.running > 0 {
			return // the last of them to finish comes back here
		}
		e.wakeLocked(acct, l, d) // paused again: the rest wait for this pause
		for _, p := range l.queue {
			// Still held back, without asking again: counted as waiting.
			_ = e.cfg.Limiter.throttle(acct, p.jobID, WaitPaused, d)
		}
		return
	}
	if l.wake != nil {
		l.wake.Stop()
		l.wake = nil
	}
	for l.running < releaseAtOnce && len(l.queue) > 0 {
		p := l.queue[0]
		l.queue[0] = parked{}
		l.queue = l.queue[1:]
		l.running++
		go func() {
			p.h.parked.Add(-1)
			if p.ctx.Err() != nil {
				_ = p.msg.NakWithDelay(0) // the loop has stopped: another worker takes it now
			} else {
				e.resume(p.ctx, p.h, p.jobID, p.msg, time.Time{})
			}
			e.parkMu.Lock()
			l.running--
			e.parkMu.Unlock()
			e.release(acct)
		}()
	}
	e.dropIdleLocked(acct, l)
}

// dropIdleLocked forgets a lot that holds and runs nothing, and stops its
// timers; it reports whether it did.
func (e *Engine) dropIdleLocked(acct string, l *lot) bool {
	if len(l.queue) > 0 || l.running > 0 {
		return false
	}
	if l.wake != nil {
		l.wake.Stop()
	}
	l.alive.Stop()
	delete(e.lots, acct)
	return true
}

// keepParked keeps a lot's waiting deliveries alive, every keepAliveEvery
// (or a third of their shortest ack wait) while it holds any, so their
// consumer does not hand them to another worker; those whose consumer
// loop has stopped go back at once.
func (e *Engine) keepParked(acct string) {
	e.parkMu.Lock()
	defer e.parkMu.Unlock()
	l := e.lots[acct]
	if l == nil {
		return
	}
	kept := l.queue[:0]
	for _, p := range l.queue {
		if p.ctx.Err() != nil {
			p.h.parked.Add(-1)
			_ = p.msg.NakWithDelay(0)
			continue
		}
		_ = p.msg.InProgress()
		kept = append(kept, p)
	}
	clear(l.queue[len(kept):])
	l.queue = kept
	if e.dropIdleLocked(acct, l) {
		return
	}
	l.alive.Reset(l.every)
}
