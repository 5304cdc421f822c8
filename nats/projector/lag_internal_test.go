package projector

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestPauseOfADeadRebuild: the lag reports the projections paused while
// a rebuild renews its pause, and not once the pause went a minute
// without renewal (the rebuild died holding it).
func TestPauseOfADeadRebuild(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	r, err := New(ctx, srv.JS, Config{Name: "t"})
	require.NoError(t, err)
	now := time.Now()
	for _, tt := range []struct {
		renewed time.Time
		paused  bool
	}{{now.Add(-5 * time.Second), true}, {now.Add(-2 * time.Minute), false}} {
		v, _ := json.Marshal(leaseValue{Holder: "rebuild", Renewed: tt.renewed})
		_, err := r.ctl.Put(ctx, pauseKey, v)
		require.NoError(t, err)
		lag, err := ReadLag(ctx, srv.JS, "", now)
		require.NoError(t, err)
		require.Equal(t, tt.paused, lag.Paused, "renewed %s ago", now.Sub(tt.renewed))
	}
}

// TestLagBehindWhenNothingIsApplied: a log no runner has applied any of
// is as far behind as it is long, not "0 s behind".
func TestLagBehindWhenNothingIsApplied(t *testing.T) {
	ctx := context.Background()
	srv := natstest.RunServer(t)
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	_, err = srv.JS.CreateOrUpdateConsumer(ctx, snats.EventStream, jetstream.ConsumerConfig{Durable: Consumer, AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	_, err = srv.JS.Publish(ctx, snats.EventSubjectPrefix+"a", []byte("first"))
	require.NoError(t, err)
	var lag Lag
	natstest.WaitFor(t, 10*time.Second, func() error {
		if _, err := srv.JS.Publish(ctx, snats.EventSubjectPrefix+"a", []byte("later")); err != nil {
			return err
		}
		if lag, err = ReadLag(ctx, srv.JS, "", time.Now()); err != nil {
			return err
		}
		if lag.Behind <= 0 {
			return fmt.Errorf("%d pending, %v behind", lag.Pending, lag.Behind)
		}
		return nil
	})
	require.Zero(t, lag.Applied)
	require.Positive(t, lag.Pending)
}

// TestLagAgeByTheServersClock: a reader whose clock is an hour ahead sees
// the projections' age as the server does, not an hour older.
func TestLagAgeByTheServersClock(t *testing.T) {
	ctx := context.Background()
	srv := natstest.RunServer(t)
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	cons, err := srv.JS.CreateOrUpdateConsumer(ctx, snats.EventStream, jetstream.ConsumerConfig{Durable: Consumer, AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	_, err = srv.JS.Publish(ctx, snats.EventSubjectPrefix+"a", []byte("applied"))
	require.NoError(t, err)
	batch, err := cons.Fetch(1)
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(ctx))
	}
	lag, err := ReadLag(ctx, srv.JS, "", time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 1, lag.Applied)
	require.Less(t, lag.Age, time.Minute, "by the server's clock")
}
