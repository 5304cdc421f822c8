package consume

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestLoopKeepsItsHandlers: a loop runs at most concurrency handlers
// at once, hands every delivery to one, and runs them on goroutines that
// stay for the next delivery: 200 deliveries through 4 slots run on at
// most 4 goroutines. Once ctx ends it returns with every handler gone
// (the package's leak check).
func TestLoopKeepsItsHandlers(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	require.NoError(t, err)
	const msgs, concurrency = 200, 4
	for i := range msgs {
		_, err := srv.JS.Publish(ctx, "t."+strconv.Itoa(i), nil)
		require.NoError(t, err)
	}
	cons, err := srv.JS.CreateConsumer(ctx, "T", jetstream.ConsumerConfig{Durable: "c", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	var (
		mu         sync.Mutex
		running    int
		most       int
		handled    = map[string]bool{}
		goroutines = map[string]bool{}
		release    = make(chan struct{})
		allDone    = make(chan struct{})
	)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- loop(runCtx, cons, concurrency, 5*time.Second, log, func(_ context.Context, msg jetstream.Msg) {
			mu.Lock()
			running++
			most = max(most, running)
			goroutines[goroutineID()] = true
			mu.Unlock()
			<-release // the first deliveries wait until every slot is taken
			_ = msg.Ack()
			mu.Lock()
			defer mu.Unlock()
			running--
			handled[msg.Subject()] = true
			if len(handled) == msgs {
				close(allDone)
			}
		})
	}()
	natstest.WaitFor(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if running < concurrency {
			return fmt.Errorf("%d of %d handlers running", running, concurrency)
		}
		return nil
	})
	close(release)
	select {
	case <-allDone:
	case <-time.After(time.Minute): // a bound, not a wait
		t.Fatal("not every delivery was handled within a minute")
	}
	stop()
	require.NoError(t, <-done)
	require.Len(t, handled, msgs)
	require.Equal(t, concurrency, most, "handlers at once")
	require.LessOrEqual(t, len(goroutines), concurrency, "goroutines that ran a handler")
}

// goroutineID is the number runtime.Stack prints for the calling goroutine.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(id)
}
