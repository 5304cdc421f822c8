package projector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

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

	v := snats.LeaseJSON.Encode(snats.LeaseClaim{Holder: "rebuild", What: "rebuild", Stamp: time.Now().Add(-time.Hour), TTL: time.Hour})
	_, err = r.ctl.Put(ctx, pauseKey, v)
	require.NoError(t, err)
	held, err := r.pause.Live(ctx)
	require.NoError(t, err)
	require.True(t, held, "the runners stand still")
	lag, err := ReadLag(ctx, srv.JS, "", time.Now())
	require.NoError(t, err)
	require.True(t, lag.Paused, "renewed just now, by a clock an hour behind")

	// A rebuild with the runners' TTL takes the pause and dies.
	rebuild := snats.NewLease(r.ctl, pauseKey, snats.LeaseConfig{Holder: "rebuild", What: "rebuild", TTL: ttl})
	require.NoError(t, r.ctl.Delete(ctx, pauseKey))
	ok, err := rebuild.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	natstest.WaitFor(t, 10*time.Second, func() error {
		held, err := r.pause.Live(ctx)
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
// is behind by as long as its first event has waited, not "0 s behind".
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

// oneAppliedOnePending writes an event and applies it (acknowledges it on
// the runner's consumer, as the runner does), waits until the server's
// clock is quiet past it by at least quiet, then writes a second one,
// which stays pending. It returns when the reader's clock said the
// second was about to be written and the server's store times of both.
func oneAppliedOnePending(t *testing.T, srv *natstest.Server, quiet time.Duration) (before time.Time, applied, pending time.Time) {
	t.Helper()
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	cons, err := ensureConsumer(ctx, srv.JS, snats.EventStream, snats.EventSubjectPrefix+">", time.Minute)
	require.NoError(t, err)
	subj := snats.EventSubjectPrefix + "0123456789abcdef0123456789abcdef"
	_, err = srv.JS.Publish(ctx, subj, []byte("applied"))
	require.NoError(t, err)
	batch, err := cons.Fetch(1)
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(ctx))
	}
	natstest.WaitFor(t, 10*time.Second, func() error {
		lag, err := ReadLag(ctx, srv.JS, "", time.Now())
		if err != nil {
			return err
		}
		if lag.Applied != 1 || lag.Age < quiet {
			return fmt.Errorf("applied up to %d, %s ago", lag.Applied, lag.Age)
		}
		return nil
	})
	before = time.Now()
	_, err = srv.JS.Publish(ctx, subj, []byte("pending"))
	require.NoError(t, err)
	st, err := srv.JS.Stream(ctx, snats.EventStream)
	require.NoError(t, err)
	m1, err := st.GetMsg(ctx, 1)
	require.NoError(t, err)
	m2, err := st.GetMsg(ctx, 2)
	require.NoError(t, err)
	return before, m1.Time, m2.Time
}

// readPending reads the lag once the server counts the second event as
// pending (a moment after its publish is acknowledged).
func readPending(t *testing.T, srv *natstest.Server) Lag {
	t.Helper()
	var lag Lag
	natstest.WaitFor(t, 10*time.Second, func() error {
		var err error
		if lag, err = ReadLag(context.Background(), srv.JS, "", time.Now()); err != nil {
			return err
		}
		if lag.Pending != 1 {
			return fmt.Errorf("%d pending", lag.Pending)
		}
		return nil
	})
	return lag
}

// TestLagBehindAfterAQuietSpell: after a quiet spell the first new event
// is behind by its own wait, the server's time now less the time it was
// stored, not by the spell: the time between the newest applied event and
// the newest event, which made /readyz fail at the first event after any
// spell longer than --ready-max-behind.
func TestLagBehindAfterAQuietSpell(t *testing.T) {
	srv := natstest.RunServer(t)
	const quiet = 300 * time.Millisecond
	before, applied, pending := oneAppliedOnePending(t, srv, quiet)
	lag := readPending(t, srv)
	waited := time.Since(before) // at least how long the pending event has waited
	require.GreaterOrEqual(t, pending.Sub(applied), quiet, "the quiet spell")
	require.Equal(t, applied, lag.AppliedAt)
	serverNow := lag.AppliedAt.Add(lag.Age) // the consumer information's time
	require.Equal(t, serverNow.Sub(pending), lag.Behind, "the pending event's wait, by the server's clock")
	require.LessOrEqual(t, lag.Behind, waited, "no more than the time since the event was written")
}

// TestLagBehindGrowsWhileNothingIsApplied: with the projections standing
// still (no runner holds the lease) and the log quiet, the event waiting
// to be applied is further behind with every read: the time between the
// newest applied event and the newest event stayed the moment between
// their two writes, and /readyz answered 200 for ever.
func TestLagBehindGrowsWhileNothingIsApplied(t *testing.T) {
	srv := natstest.RunServer(t)
	_, _, pending := oneAppliedOnePending(t, srv, 0)
	const wait = 500 * time.Millisecond
	var lag Lag
	natstest.WaitFor(t, 10*time.Second, func() error {
		lag = readPending(t, srv)
		if lag.Behind < wait {
			return fmt.Errorf("%s behind", lag.Behind)
		}
		return nil
	})
	require.Equal(t, lag.AppliedAt.Add(lag.Age).Sub(pending), lag.Behind, "the pending event's wait, by the server's clock")
}
