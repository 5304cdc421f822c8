package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/engine/enginetest"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestWaitingValuesDoNotAccumulate: every engine writes who waits for what
// under a key of its own name (host and pid); a limiter deletes its own
// when it stops, and deletes those left an hour ago by workers that were
// killed, so serp_accounts does not grow with every restart.
func TestWaitingValuesDoNotAccumulate(t *testing.T) {
	kv := enginetest.NewBucket()
	ctx := context.Background()
	put := func(key string, at time.Time) {
		b, err := json.Marshal(engine.WaitingValue{Worker: key, Jobs: 1, ByReason: map[string]int{engine.WaitInFlight: 1}, At: at})
		require.NoError(t, err)
		require.NoError(t, kv.Put(ctx, key, b))
	}
	put("wait.default.killed-long-ago", time.Now().Add(-2*time.Hour))
	put("wait.default.another-engine", time.Now())
	require.NoError(t, engine.SetLimits(ctx, kv, "", accounts.Limits{MaxInFlight: 1}))

	lim, err := engine.NewLimiter(ctx, kv, "w1", time.Minute, nil, nil)
	require.NoError(t, err)
	gone := func(key string) func() error {
		return func() error {
			if _, rev, err := kv.Get(ctx, key); err != nil || rev != 0 {
				return fmt.Errorf("%s still there (%v)", key, err)
			}
			return nil
		}
	}
	natstest.WaitFor(t, 10*time.Second, gone("wait.default.killed-long-ago"))
	_, rev, err := kv.Get(ctx, "wait.default.another-engine")
	require.NoError(t, err)
	require.NotZero(t, rev, "a live engine's value is kept")

	// A job held back makes the limiter write its own value.
	p, err := lim.Acquire(ctx, engine.Request{JobID: "a"})
	require.NoError(t, err)
	defer p.Done(ctx, false, true, 0)
	natstest.WaitFor(t, 10*time.Second, func() error {
		_, _ = lim.Acquire(ctx, engine.Request{JobID: "b"}) // held back: the one slot is taken
		if _, rev, err := kv.Get(ctx, "wait.default.w1"); err != nil || rev == 0 {
			return fmt.Errorf("no value of its own yet (%v)", err)
		}
		return nil
	})
	lim.Close()
	require.NoError(t, gone("wait.default.w1")(), "deleted when the limiter stops")
}

// TestSlotKeptWhileTheSearchMayRun: a search whose outcome is unknown may
// still run at the API, so its slot stays taken (another job waits) until
// the job's resend of the key takes it over; a resend that never leaves,
// or whose answer says nothing of the first search, gives that hold back;
// an answer that ends the key's search frees it.
func TestSlotKeptWhileTheSearchMayRun(t *testing.T) {
	kv := enginetest.NewBucket()
	ctx := context.Background()
	require.NoError(t, engine.SetLimits(ctx, kv, "", accounts.Limits{MaxInFlight: 1}))
	lim, err := engine.NewLimiter(ctx, kv, "w1", time.Minute, nil, nil)
	require.NoError(t, err)
	t.Cleanup(lim.Close)

	p, err := lim.Acquire(ctx, engine.Request{JobID: "a"})
	require.NoError(t, err)
	p.MayStillRun() // a timeout: the search may be running
	p.Done(ctx, false, false, 0)
	_, err = lim.Acquire(ctx, engine.Request{JobID: "b"})
	var te *engine.ThrottledError
	require.ErrorAs(t, err, &te, "the unknown search still counts in flight")
	require.Equal(t, engine.WaitInFlight, te.Reason)

	again, err := lim.Acquire(ctx, engine.Request{JobID: "a", Resend: true})
	require.NoError(t, err, "the key's resend takes its own slot over")
	again.Unused(ctx) // the resend never left: the first search's hold comes back
	_, err = lim.Acquire(ctx, engine.Request{JobID: "b"})
	require.ErrorAs(t, err, &te, "the first search may still run")

	again, err = lim.Acquire(ctx, engine.Request{JobID: "a", Resend: true})
	require.NoError(t, err)
	again.Done(ctx, false, true, 0) // 429: this resend did not run, the first may
	_, err = lim.Acquire(ctx, engine.Request{JobID: "b"})
	require.ErrorAs(t, err, &te, "an answer that says nothing of the first search keeps its hold")

	// Two deliveries of the job at once: the second takes the slot over
	// from the first and gives it back (it lost the claim); the first's
	// result still frees it.
	first, err := lim.Acquire(ctx, engine.Request{JobID: "a", Resend: true})
	require.NoError(t, err)
	second, err := lim.Acquire(ctx, engine.Request{JobID: "a", Resend: true})
	require.NoError(t, err)
	second.Unused(ctx)
	first.SearchOver() // a result: the key's search has ended
	first.Done(ctx, true, true, 1)
	p, err = lim.Acquire(ctx, engine.Request{JobID: "b"})
	require.NoError(t, err, "the slot is free once the key's search is over")
	p.Done(ctx, true, true, 1)
}
