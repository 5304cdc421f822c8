package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
	"github.com/stretchr/testify/require"
)

// TestUnknownAccountIsRefusedWithoutAccounts: an engine started without
// --accounts has the default account alone, its day capped at one page
// and spent. A command naming another account is rejected as
// invalid_account (README, "Spend and rate control"), not bought with the
// default token outside the default account's budget.
func TestUnknownAccountIsRefusedWithoutAccounts(t *testing.T) {
	l, _ := setupLimited(t, sandbox.Config{})
	l.setLimits(accounts.Limits{DailyPages: 1})
	l.start(l.limitedEngine("w", time.Minute), 4)

	l.publish(cmdFor(0))
	l.waitTerminal([]string{jobFor(t, cmdFor(0))}, 20*time.Second) // the day's one page is spent

	other := `{"slot":"2026-12-02T00:01:00Z","query":"espresso scale 1","country":"US","language":"en","device":"mobile","account":"not-configured"}`
	l.publish(other)
	job := jobFor(t, other)
	natstest.WaitFor(t, 20*time.Second, func() error {
		if l.rejections()["serp.rejected.invalid_account"] == 1 {
			return nil
		}
		evs, _, err := l.store.Load(context.Background(), job)
		require.NoError(t, err)
		s := aggregate.Fold(evs)
		require.NotEqual(t, aggregate.StatusSucceeded, s.Status,
			"a command naming an account the engine does not have was bought with the default API, past the default account's spent budget")
		return errors.New("not yet rejected")
	})
}

// TestBudgetHeldJobFailsAtItsAgeBudget: a job its account's day budget
// holds back fails when its age budget ends, as any job that could not be
// sent in time, not when the next day's budget lets it be claimed: ending
// a job buys nothing, and needs no permit.
func TestBudgetHeldJobFailsAtItsAgeBudget(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return success("r", false) })
	srv := natstest.RunServer(t)
	ctx := context.Background()
	require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{}, time.Second))
	held := accounts.Limits{DailyMicros: 1} // not a page fits
	require.NoError(t, engine.SetLimits(ctx, srv.JS, "", held))
	lim, err := engine.NewLimiter(ctx, srv.JS, "w", time.Minute, e.clock.Now, nil)
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
