package consume_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper/sandbox"
	"github.com/stretchr/testify/require"
)

// TestWaitingEndsWithTheJobs: two engines work through jobs of an account
// that allows one search at a time, so most wait. Once every job has
// finished, the jobs waiting that the engines report fall to none within
// seconds: a job that ended, or went on at the other engine, is no longer
// counted (it used to be for ten minutes).
func TestWaitingEndsWithTheJobs(t *testing.T) {
	t.Parallel()
	l, _ := setupLimited(t, sandbox.Config{SearchTime: 400 * time.Millisecond})
	l.setLimits(accounts.Limits{MaxInFlight: 1})
	for _, name := range []string{"a", "b"} {
		l.start(l.limitedEngine(name, time.Minute), 4)
	}
	var jobs []string
	for i := range 12 {
		l.publish(cmdFor(i))
		jobs = append(jobs, jobFor(t, cmdFor(i)))
	}
	ctx := context.Background()
	natstest.WaitFor(t, 20*time.Second, func() error {
		st, err := engine.AccountStatuses(ctx, l.accounts(), time.Now())
		if err != nil || len(st) != 1 || st[0].Waiting == 0 {
			return fmt.Errorf("no job seen waiting: %+v %v", st, err)
		}
		return nil
	})
	for _, s := range l.waitTerminal(jobs, time.Minute) {
		require.Equal(t, aggregate.StatusSucceeded, s.Status)
	}
	natstest.WaitFor(t, 20*time.Second, func() error {
		st, err := engine.AccountStatuses(ctx, l.accounts(), time.Now())
		if err != nil || len(st) != 1 || st[0].Waiting != 0 {
			return fmt.Errorf("still waiting: %+v %v", st, err)
		}
		return nil
	})
}
