package engine

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/engine/enginetest"
)

// TestSlotLastsTheJobsLease: a worker whose limiter holds slots for two
// minutes takes the account's only slot for a job whose claim lease is
// ten, and dies without giving it back. The job's search may run until
// its lease ends, so a second worker finds the slot taken three minutes
// on, and free once the job's lease is over.
func TestSlotLastsTheJobsLease(t *testing.T) {
	ctx := context.Background()
	clk := &budgetClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	kv := enginetest.NewBucket()
	lim := accounts.Limits{MaxInFlight: 1}
	require.NoError(t, SetLimits(ctx, kv, "", lim))
	dead, other := limiterOn(t, kv, "dead", lim, clk), limiterOn(t, kv, "other", lim, clk)

	_, err := dead.Acquire(ctx, Request{JobID: "j1", Lease: 10 * time.Minute, Pages: 1})
	require.NoError(t, err) // never released: its worker died

	clk.add(3 * time.Minute)
	_, err = other.Acquire(ctx, Request{JobID: "j2", Lease: 10 * time.Minute, Pages: 1})
	var throttled *ThrottledError
	require.ErrorAs(t, err, &throttled, "the dead worker's search may still run")

	clk.add(8 * time.Minute)
	p, err := other.Acquire(ctx, Request{JobID: "j2", Lease: 10 * time.Minute, Pages: 1})
	require.NoError(t, err, "the job's lease is over")
	p.release(ctx)
}
