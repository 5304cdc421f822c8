package consume_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/nats/natstest"
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
