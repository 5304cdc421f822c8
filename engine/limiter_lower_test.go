package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/engine/enginetest"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/stretchr/testify/require"
)

// TestLoweredCapHoldsUnderLoad: two engines' limiters on one bucket run
// eight searches at a cap of eight, each of a different length; the cap
// is lowered to two. Once both apply it, no search they let start finds
// two others running: the old searches count, whatever slot holds them,
// until they end.
func TestLoweredCapHoldsUnderLoad(t *testing.T) {
	kv := enginetest.NewBucket()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, engine.SetLimits(ctx, kv, "", accounts.Limits{MaxInFlight: 8}))
	var lims []*engine.Limiter
	for _, name := range []string{"a", "b"} {
		lim, err := engine.NewLimiter(ctx, kv, name, time.Minute, nil, nil)
		require.NoError(t, err)
		t.Cleanup(lim.Close)
		lims = append(lims, lim)
	}
	applied := func(n int) func() error {
		return func() error {
			for _, lim := range lims {
				if got := lim.Limits("").MaxInFlight; got != n {
					return fmt.Errorf("a limiter applies a cap of %d", got)
				}
			}
			return nil
		}
	}
	natstest.WaitFor(t, 10*time.Second, applied(8))

	var (
		mu      sync.Mutex
		running int
		started int // searches let start once the cap of two applied
		worst   int // the most running when one of those started, itself included
	)
	// run holds a permit for d, as a search would.
	run := func(p *engine.Permit, d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
		mu.Lock()
		running--
		mu.Unlock()
		p.Done(context.WithoutCancel(ctx), true, true, 0)
	}
	var wg sync.WaitGroup
	full := make(chan struct{})
	for i := range 8 {
		p, err := lims[i%2].Acquire(ctx, engine.Request{JobID: fmt.Sprintf("old-%d", i)})
		require.NoError(t, err)
		mu.Lock()
		if running++; running == 8 {
			close(full)
		}
		mu.Unlock()
		wg.Go(func() { run(p, time.Duration(300+200*i)*time.Millisecond) })
	}
	<-full
	require.NoError(t, engine.SetLimits(ctx, kv, "", accounts.Limits{MaxInFlight: 2}))
	natstest.WaitFor(t, 10*time.Second, applied(2))

	enough := make(chan struct{})
	for g := range 8 {
		lim := lims[g%2]
		wg.Go(func() {
			for n := 0; ctx.Err() == nil; n++ {
				p, err := lim.Acquire(ctx, engine.Request{JobID: fmt.Sprintf("new-%d-%d", g, n), High: true})
				var te *engine.ThrottledError
				if errors.As(err, &te) || ctx.Err() != nil {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				running++
				worst = max(worst, running)
				if started++; started == 30 {
					close(enough)
				}
				mu.Unlock()
				run(p, 20*time.Millisecond)
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(30 * time.Second):
		t.Fatal("too few searches started once the cap was lowered")
	}
	cancel()
	wg.Wait()
	require.LessOrEqual(t, worst, 2, "searches running, a new one included, once the lowered cap applies")
}
