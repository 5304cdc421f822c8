package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	snats "github.com/serpent-engine/serpent/nats"
)

// RunOptions tunes Run.
type RunOptions struct {
	// Concurrency is how many jobs this process works on at once.
	Concurrency int
	// Grace is how long in-flight steps may finish after ctx ends before
	// they are cancelled. A cancelled step is safe: its job resumes from
	// the log with the same key once its lease ends.
	Grace time.Duration
	// RetryDelay is how soon a delivery whose step failed is tried again.
	RetryDelay time.Duration
}

func (o RunOptions) withDefaults() RunOptions {
	if o.Concurrency <= 0 {
		o.Concurrency = 8
	}
	if o.Grace <= 0 {
		o.Grace = 15 * time.Second
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = time.Second
	}
	return o
}

// Run takes due jobs from a JetStream consumer on serp.work.> and steps
// them until ctx ends. Then it stops taking work, lets in-flight steps
// finish within the grace period and returns.
func (e *Engine) Run(ctx context.Context, cons jetstream.Consumer, opts RunOptions) error {
	opts = opts.withDefaults()
	return e.consume(ctx, cons, opts.Concurrency, opts.Grace, func(ctx context.Context, msg jetstream.Msg) {
		e.HandleWork(ctx, msg, opts)
	})
}

// consume hands each delivery of cons to handle, at most concurrency at a
// time, until ctx ends; then it waits up to grace for the handlers before
// cancelling their context. Deliveries pulled but not started are left
// unacknowledged and go to another worker after their ack wait.
//
// The handlers run on goroutines that stay for the next delivery rather
// than one new goroutine a delivery: a step's call chain (the API request
// through net/http, the append) grows a fresh goroutine's stack several
// times, and copying it cost some 5 % of the CPU of the happy path.
func (e *Engine) consume(ctx context.Context, cons jetstream.Consumer, concurrency int, grace time.Duration, handle func(context.Context, jetstream.Msg)) error {
	it, err := cons.Messages(jetstream.PullMaxMessages(concurrency))
	if err != nil {
		return err
	}
	stopIt := context.AfterFunc(ctx, it.Stop)
	defer stopIt()
	work, cancelWork := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelWork()
	slots := make(chan struct{}, concurrency)
	idle := make(chan jetstream.Msg) // a handler waiting for its next delivery
	handlers := 0                    // started, at most concurrency
	var wg sync.WaitGroup
	var ended error
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		msg, err := it.Next()
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				break
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				// Not stopped by us: the consumer went away (deleted, its
				// stream recreated). Nothing more will come; say so.
				ended = fmt.Errorf("%w: %s", ErrConsumerGone, consumerName(cons))
				break
			}
			e.log.Warn("taking work failed", "err", err)
			sleep(ctx, time.Second)
			continue
		}
		select {
		case idle <- msg:
		default:
			if handlers == concurrency {
				// Every handler is started and none waits yet: the one
				// that gave its slot back is on its way to idle.
				idle <- msg
				continue
			}
			handlers++
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ok := true; ok; msg, ok = <-idle {
					handle(work, msg)
					<-slots
				}
			}()
		}
	}
	close(idle) // handlers end once they are done with their delivery
	it.Stop()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		e.log.Warn("in-flight work did not finish within the grace period; cancelling it", "grace", grace)
		cancelWork()
		<-done
	}
	return ended
}

func consumerName(cons jetstream.Consumer) string {
	if ci := cons.CachedInfo(); ci != nil {
		return ci.Name
	}
	return "?"
}

// ErrConsumerGone: a loop's consumer stopped delivering for good (it was
// deleted, or its stream was made again) while the loop still ran.
var ErrConsumerGone = errors.New("engine: the consumer is gone")

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

// hold hands a delivery back to the server, to be delivered again after d,
// when the wait is short and few are held: a wait on a paused or limited
// account then writes nothing, where a timer writes its schedule and
// then the wake-up. It reports whether it did.
func (e *Engine) hold(msg jetstream.Msg, d time.Duration) bool {
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

// storedAt is when the server stored a delivery's message, by its clock
// (a timer's wake-up: when the timer fired); zero if unknown.
func storedAt(msg jetstream.Msg) time.Time {
	if meta, err := msg.Metadata(); err == nil {
		return meta.Timestamp
	}
	return time.Time{}
}

// Held is the number of work deliveries this process has handed back to
// wait out a throttle and whose delay has not run out yet.
func (e *Engine) Held() int { return int(e.held.Load()) }

// HandleWork steps the job of one delivery of serp.work.<job> and settles
// the delivery: acknowledged once the job is done or its timer armed,
// handed back with a delay to wait out a short throttle (or an early
// wake-up), asked again after opts.RetryDelay when the step failed,
// terminated when the job does not exist, left alone when a test hook
// played a crash. Run calls it for every delivery; the simulation (package
// sim) calls it with its own messages, so both run this code.
func (e *Engine) HandleWork(ctx context.Context, msg jetstream.Msg, opts RunOptions) {
	opts = opts.withDefaults()
	jobID := strings.TrimPrefix(msg.Subject(), snats.WorkSubjectPrefix)
	held := false
	err := e.settle(ctx, jobID, known{}, func() { _ = msg.InProgress() }, func(d time.Duration) bool {
		held = e.hold(msg, d)
		return held
	}, storedAt(msg))
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
		_ = msg.NakWithDelay(opts.RetryDelay)
		return
	}
	_ = msg.Ack()
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
