package consume_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// countedTimers counts the timers an engine arms.
type countedTimers struct {
	engine.Timers
	n atomic.Int64
}

func (c *countedTimers) Arm(ctx context.Context, jobID string, at time.Time) error {
	c.n.Add(1)
	return c.Timers.Arm(ctx, jobID, at)
}

// TestSlowEngineClockDoesNotSpin: the engine's clock runs 1.2 s behind the
// server's, which fires the timers. A gateway page on the first send makes
// the job wait a second by the engine's clock; the server's clock is past
// that time already, so a timer armed for it fires at once, and the engine,
// to which the job is not due yet, used to arm it again, and again, for as
// long as the wait. The early wake-up is handed back for the rest of the
// wait instead: one timer.
func TestSlowEngineClockDoesNotSpin(t *testing.T) {
	l := setupLive(t, sandbox.Faults{})
	var once sync.Once
	gateway := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := false
		if r.URL.Path == "/v1/search" {
			once.Do(func() { first = true })
		}
		if first {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = w.Write([]byte("<html><body>502 Bad Gateway</body></html>"))
			return
		}
		l.sb.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(gateway)
	t.Cleanup(srv.Close)
	client, err := serper.New(serper.Config{BaseURL: srv.URL, Token: sandbox.DefaultToken, Timeout: 5 * time.Second, AllowShortTimeout: true})
	require.NoError(t, err)
	t.Cleanup(client.CloseIdleConnections)

	slow := func() time.Time { return time.Now().Add(-1200 * time.Millisecond) }
	policy := l.policy
	policy.BaseDelay = events.Duration(time.Second)
	policy.MinDelay = events.Duration(time.Second)
	policy.MaxDelay = events.Duration(time.Second)
	policy.Lease = events.Duration(5 * time.Second)
	timers := &countedTimers{Timers: snats.NewTimers(l.srv.JS, slow)}
	eng, err := engine.New(engine.Config{Name: "slow", Store: l.store, API: client, Timers: timers,
		Policy: policy, Now: slow, ReconcileRetry: 100 * time.Millisecond})
	require.NoError(t, err)
	l.start(eng, 4)

	l.publish(cmdFor(1))
	states := l.waitTerminal([]string{jobFor(t, cmdFor(1))}, 30*time.Second)
	for _, s := range states {
		require.Equal(t, aggregate.StatusSucceeded, s.Status)
		require.Equal(t, 2, s.Sends)
	}
	// One timer for the wait; the result of the resend is the key's
	// second send, whose charges are checked after the lease: one more.
	require.LessOrEqual(t, timers.n.Load(), int64(2), "timers armed for one wait and the check of the result's charges")
}

// countedScheduleTimers counts the timers schedules arm.
type countedScheduleTimers struct {
	engine.ScheduleTimers
	n atomic.Int64
}

func (c *countedScheduleTimers) ArmSchedule(ctx context.Context, id string, at time.Time) error {
	c.n.Add(1)
	return c.ScheduleTimers.ArmSchedule(ctx, id, at)
}

// TestSlowEngineClockFiresEachSlotOnce: the same 1.2 s skew under an
// "@every 2s" schedule. Its timer fires 1.2 s before the engine's clock
// reaches the slot; the engine used to arm the same slot again until its
// clock got there. It now arms the rest of the wait by the server's
// clock: one timer a slot, and one job each.
func TestSlowEngineClockFiresEachSlotOnce(t *testing.T) {
	t.Parallel()
	l := setupLive(t, sandbox.Faults{})
	ctx := context.Background()
	slow := func() time.Time { return time.Now().Add(-1200 * time.Millisecond) }
	timers := &countedScheduleTimers{ScheduleTimers: snats.NewTimers(l.srv.JS, slow)}
	s, err := l.newSchedules(timers, slow)
	require.NoError(t, err)
	_, err = s.Create(ctx, espresso("skewed", "@every 2s"))
	require.NoError(t, err)
	eng, err := engine.New(engine.Config{Name: "slow", Store: l.store, API: l.client,
		Timers: snats.NewTimers(l.srv.JS, slow), Policy: l.policy, Now: slow})
	require.NoError(t, err)
	l.startFiring(eng, s)

	var rec engine.Record
	natstest.WaitFor(t, 20*time.Second, func() error {
		if rec, _, err = s.Get(ctx, "skewed"); err != nil {
			return err
		}
		if len(rec.State.Recent) < 3 {
			return fmt.Errorf("%d slots fired", len(rec.State.Recent))
		}
		return nil
	})
	for i, f := range rec.State.Recent {
		if i > 0 {
			require.Equal(t, 2*time.Second, f.Slot.Sub(rec.State.Recent[i-1].Slot), "one job a slot")
		}
	}
	// One timer at the create and one a fired slot, give or take the
	// slot being armed while the check ran.
	require.LessOrEqual(t, timers.n.Load(), int64(len(rec.State.Recent)+2), "timers armed")
}
