package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/engine/enginetest"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/stretchr/testify/require"
)

// TestBudgetHeldJobFailsAtItsAgeBudget: a job its account's day budget
// holds back fails when its age budget ends, as any job that could not be
// sent in time, not when the next day's budget lets it be claimed: ending
// a job buys nothing, and needs no permit.
func TestBudgetHeldJobFailsAtItsAgeBudget(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return success("r", false) })
	kv := enginetest.NewBucket()
	ctx := context.Background()
	held := accounts.Limits{DailyMicros: 1} // not a page fits
	require.NoError(t, engine.SetLimits(ctx, kv, "", held))
	lim, err := engine.NewLimiter(ctx, kv, "w", time.Minute, e.clock.Now, nil)
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	natstest.WaitFor(t, 10*time.Second, func() error {
		if lim.Limits("") != held {
			return errors.New("limits not seen yet")
		}
		return nil
	})
	eng, err := engine.New(engine.Config{Name: "w", Store: e.store, API: e.api, Timers: e.timers, Now: e.clock.Now, Limiter: lim})
	require.NoError(t, err)
	job := e.schedule(eng)
	e.clock.Set(e.state(job).Slot)
	next, err := eng.Step(ctx, job, nil)
	require.NoError(t, err)
	require.Equal(t, aggregate.StepWait, next.Step, "held back by the day's budget")

	s := e.state(job)
	e.clock.Set(aggregate.AgeDeadline(s.Policy, s.AgeStart()).Add(time.Second))
	next, err = eng.Step(ctx, job, nil)
	require.NoError(t, err)
	require.Equal(t, aggregate.StepDone, next.Step)
	s = e.state(job)
	require.Equal(t, aggregate.StatusFailed, s.Status)
	require.Equal(t, aggregate.ReasonAgeBudget, s.Failure.Reason)
	require.Zero(t, e.api.sendCount())
}
