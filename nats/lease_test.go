package nats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

func leaseBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	srv := natstest.RunServer(t)
	kv, err := srv.JS.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "leases", History: 1})
	require.NoError(t, err)
	return kv
}

// TestLeaseOneHolderAtATime: of two contenders one holds the key; the
// other takes it only once the holder has stopped writing it and its
// revision has stood still for a TTL, and the old holder's renewal then
// fails.
func TestLeaseOneHolderAtATime(t *testing.T) {
	kv := leaseBucket(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	a := snats.NewLease(kv, "k", snats.LeaseConfig{Holder: "a", What: "test", TTL: ttl})
	b := snats.NewLease(kv, "k", snats.LeaseConfig{Holder: "b", What: "test", TTL: ttl})
	ok, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, a.Held())

	// While a renews, b never takes the key.
	for range 5 {
		require.NoError(t, a.Renew(ctx))
		ok, err := b.Acquire(ctx)
		require.NoError(t, err)
		require.False(t, ok)
	}
	e, err := kv.Get(ctx, "k")
	require.NoError(t, err)
	claim, ok := snats.ReadLeaseClaim(e.Value())
	require.True(t, ok)
	require.Equal(t, "a", claim.Holder)
	require.Equal(t, "test", claim.What)
	require.Equal(t, ttl, claim.TTL)

	// a stops writing; b takes over once the key stood still for a TTL,
	// after a stopped trusting its claim.
	natstest.WaitFor(t, 10*time.Second, func() error {
		ok, err := b.Acquire(ctx)
		if err == nil && !ok {
			err = errors.New("b does not hold the key yet")
		}
		return err
	})
	require.False(t, a.Held(), "a trusts its claim for less than a TTL")
	require.ErrorIs(t, a.Renew(ctx), snats.ErrLeaseLost)
	require.False(t, a.Claimed())
}

// TestLeaseRelease: a key given up is taken at once; a holder that lost
// track of its claim takes it back at once; a release after a takeover
// leaves the new holder's claim.
func TestLeaseRelease(t *testing.T) {
	kv := leaseBucket(t)
	ctx := context.Background()
	cfg := func(holder string) snats.LeaseConfig { return snats.LeaseConfig{Holder: holder, TTL: time.Hour} }
	a := snats.NewLease(kv, "k", cfg("a"))
	ok, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, a.Release(ctx))

	b := snats.NewLease(kv, "k", cfg("b"))
	ok, err = b.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the key was given up")

	again := snats.NewLease(kv, "k", cfg("b"))
	ok, found, err := again.Take(ctx)
	require.NoError(t, err)
	require.True(t, ok, "b's own claim, written by a lease that lost track of it")
	require.Equal(t, "b", found.Holder)
	require.ErrorIs(t, b.Renew(ctx), snats.ErrLeaseLost, "the older lease of b's was taken over")
	require.NoError(t, b.Release(ctx), "releasing a lost claim is nothing")
	live, err := snats.NewLease(kv, "k", cfg("c")).Live(ctx)
	require.NoError(t, err)
	require.True(t, live, "the claim taken back is still there")
}

// TestLeaseLive: a key someone writes is live; one whose revision stands
// still for a TTL is not; an absent one is not.
func TestLeaseLive(t *testing.T) {
	kv := leaseBucket(t)
	ctx := context.Background()
	const ttl = 200 * time.Millisecond
	holder := snats.NewLease(kv, "pause", snats.LeaseConfig{Holder: "rebuild", TTL: ttl})
	watcher := snats.NewLease(kv, "pause", snats.LeaseConfig{Holder: "runner", TTL: ttl})
	live, err := watcher.Live(ctx)
	require.NoError(t, err)
	require.False(t, live, "no key")
	ok, err := holder.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	live, err = watcher.Live(ctx)
	require.NoError(t, err)
	require.True(t, live)
	natstest.WaitFor(t, 10*time.Second, func() error {
		live, err := watcher.Live(ctx)
		if err == nil && live {
			err = errors.New("still live")
		}
		return err
	})
}

// TestLeaseOnASharedClock: a lease given a shared clock judges a claim by
// the time written in it, at one look: stale a TTL after it, or when it
// is further ahead than Ahead.
func TestLeaseOnASharedClock(t *testing.T) {
	kv := leaseBucket(t)
	ctx := context.Background()
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	lease := func(holder string) *snats.Lease {
		return snats.NewLease(kv, "k", snats.LeaseConfig{Holder: holder, TTL: time.Minute, Ahead: time.Hour, Now: clock})
	}
	ok, _, err := lease("a").Take(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	now = t0.Add(59 * time.Second)
	ok, found, err := lease("b").Take(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, t0, found.Stamp.UTC())
	now = t0.Add(time.Minute)
	ok, _, err = lease("b").Take(ctx)
	require.NoError(t, err)
	require.True(t, ok, "a TTL after a's write")

	now = t0.Add(-30 * time.Minute)
	ok, _, err = lease("c").Take(ctx)
	require.NoError(t, err)
	require.False(t, ok, "half an hour ahead: a clock a little off")
	now = t0.Add(-2 * time.Hour)
	ok, found, err = lease("c").Take(ctx)
	require.NoError(t, err)
	require.True(t, ok, "two hours ahead: a clock far off")
	require.Equal(t, "b", found.Holder)
}
