package projector

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestPauseOfADeadRebuild: the lag reports the projections paused as the
// runners judge a rebuild's pause: until its revision has stood still for
// a lease TTL (the rebuild's, which must be the runners'), counted by the
// server's clock from when it stored the revision. The rebuild's own clock
// says nothing: a pause renewed just now by a rebuild whose clock is an
// hour behind holds the runners, and a pause no longer renewed stops
// holding them, and being reported, after a TTL, not a minute.
func TestPauseOfADeadRebuild(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	const ttl = 50 * time.Millisecond
	r, err := New(ctx, srv.JS, Config{Name: "t", LeaseTTL: ttl})
	require.NoError(t, err)

	v, _ := json.Marshal(leaseValue{Holder: "rebuild", What: "rebuild", Renewed: time.Now().Add(-time.Hour), TTL: events.Duration(time.Hour)})
	_, err = r.ctl.Put(ctx, pauseKey, v)
	require.NoError(t, err)
	held, err := r.pause.live(ctx)
	require.NoError(t, err)
	require.True(t, held, "the runners stand still")
	lag, err := ReadLag(ctx, srv.JS, "", time.Now())
	require.NoError(t, err)
	require.True(t, lag.Paused, "renewed just now, by a clock an hour behind")

	// A rebuild with the runners' TTL takes the pause and dies.
	rebuild := newLease(r.ctl, pauseKey, "rebuild", "rebuild", ttl)
	require.NoError(t, r.ctl.Delete(ctx, pauseKey))
	ok, err := rebuild.acquire(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	natstest.WaitFor(t, 10*time.Second, func() error {
		held, err := r.pause.live(ctx)
		if err != nil {
			return err
		}
		lag, err := ReadLag(ctx, srv.JS, "", time.Now())
		if err != nil {
			return err
		}
		if held || lag.Paused {
			return fmt.Errorf("runners held %v, lag paused %v", held, lag.Paused)
		}
		return nil
	})
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
