package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrConsumerGone: a loop's consumer stopped delivering for good (it was
// deleted, or its stream was made again) while the loop still ran.
var ErrConsumerGone = errors.New("consume: the consumer is gone")

// loop hands each delivery of cons to handle, at most concurrency at a
// time, until ctx ends; then it waits up to grace for the handlers before
// cancelling their context. Deliveries pulled but not started are left
// unacknowledged and go to another worker after their ack wait.
//
// The handlers run on goroutines that stay for the next delivery rather
// than one new goroutine a delivery: a step's call chain (the API request
// through net/http, the append) grows a fresh goroutine's stack several
// times, and copying it cost some 5 % of the CPU of the happy path.
func loop(ctx context.Context, cons jetstream.Consumer, concurrency int, grace time.Duration, log *slog.Logger, handle func(context.Context, jetstream.Msg)) error {
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
			log.Warn("taking work failed", "err", err)
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
		log.Warn("in-flight work did not finish within the grace period; cancelling it", "grace", grace)
		cancelWork()
		<-done
	}
	return ended
}

// ackWait is how long cons waits for a sign of life from a delivery
// before it delivers it again; zero if unknown.
func ackWait(cons jetstream.Consumer) time.Duration {
	if ci := cons.CachedInfo(); ci != nil {
		return ci.Config.AckWait
	}
	return 0
}

func consumerName(cons jetstream.Consumer) string {
	if ci := cons.CachedInfo(); ci != nil {
		return ci.Name
	}
	return "?"
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
