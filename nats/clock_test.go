package nats_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestServerClockAgreesAcrossMachines: two engines whose machines' clocks
// are 35 s behind and 35 s ahead read the same time, the server's, to
// within their round trips: one engine's lease end or key deadline means
// the same moment to the other.
func TestServerClockAgreesAcrossMachines(t *testing.T) {
	ctx := context.Background()
	srv := natstest.RunServer(t)
	require.NoError(t, nats.EnsureEngineStreams(ctx, srv.JS, nats.StreamOptions{}, time.Second))
	skewed := func(d time.Duration) *nats.ServerClock {
		c, err := nats.NewServerClock(ctx, srv.JS, func() time.Time { return time.Now().Add(d) }, nil)
		require.NoError(t, err)
		t.Cleanup(c.Close)
		return c
	}
	behind, ahead := skewed(-35*time.Second), skewed(35*time.Second)

	off, within := behind.Offset()
	require.InDelta(t, float64(35*time.Second), float64(off), float64(within+50*time.Millisecond), "offset %v within %v", off, within)
	off, within = ahead.Offset()
	require.InDelta(t, float64(-35*time.Second), float64(off), float64(within+50*time.Millisecond), "offset %v within %v", off, within)

	// Read at the same moment (this test's clock is the server's: both
	// run on this machine), the two agree with it.
	now, b, a := time.Now(), behind.Now(), ahead.Now()
	require.InDelta(t, 0, float64(b.Sub(now)), float64(100*time.Millisecond), "behind reads %v, the server %v", b, now)
	require.InDelta(t, 0, float64(a.Sub(now)), float64(100*time.Millisecond), "ahead reads %v, the server %v", a, now)
}

// TestServerClockNeedsTheBucket: without serp_accounts there is nothing to
// read the server's time from, and no clock.
func TestServerClockNeedsTheBucket(t *testing.T) {
	srv := natstest.RunServer(t)
	_, err := nats.NewServerClock(context.Background(), srv.JS, nil, nil)
	require.ErrorContains(t, err, "server clock")
}

// TestSlowRoundTripDoesNotMoveTheClock: round trips that take seconds (a
// server restarting mid-put) say little about the offset; the clock is
// only corrected by what every stamp agrees on. Halving a 10 s round trip
// once moved an engine's clock 5 s, and it sent keys past their deadline.
func TestSlowRoundTripDoesNotMoveTheClock(t *testing.T) {
	ctx := context.Background()
	srv := natstest.RunServer(t)
	require.NoError(t, nats.EnsureEngineStreams(ctx, srv.JS, nats.StreamOptions{}, time.Second))
	var mu sync.Mutex
	reads := 0
	slowAcks := func() time.Time { // every second reading (an acknowledgement) comes 10 s late
		mu.Lock()
		defer mu.Unlock()
		reads++
		if reads%2 == 0 {
			return time.Now().Add(10 * time.Second)
		}
		return time.Now()
	}
	c, err := nats.NewServerClock(ctx, srv.JS, slowAcks, nil)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	off, within := c.Offset()
	require.Zero(t, off, "this machine's clock agrees with the server's (within %v)", within)
}
