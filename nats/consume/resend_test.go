package consume_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// resendAfter runs one job whose first send buys but loses its reply, and
// whose resends meet the sandbox with the given faults. It returns the
// job's history once the job needs nothing more.
func resendAfter(t *testing.T, resends sandbox.Faults) (*live, []events.Event) {
	l := setupLive(t, sandbox.Faults{DropAfterSearch: 1})
	l.policy.ReplayWindow = events.Duration(4 * time.Second)
	l.policy.SafetyMargin = events.Duration(time.Second)
	hooks := engine.Hooks{AfterSearch: func(string) error {
		l.sb.SetFaults(resends) // every send after the first
		return nil
	}}
	l.start(l.engine("a", hooks), 2)
	cmd := cmdFor(7)
	l.publish(cmd)
	job := jobFor(t, cmd)
	var evs []events.Event
	natstest.WaitFor(t, 30*time.Second, func() error {
		var err error
		if evs, _, err = l.store.Load(context.Background(), job); err != nil {
			return err
		}
		if s := aggregate.Fold(evs); !s.Finished() {
			return &stillRunning{s.Status}
		}
		return nil
	})
	require.Empty(t, aggregate.Verify(evs))
	return l, evs
}

type stillRunning struct{ status aggregate.Status }

func (e *stillRunning) Error() string { return "the job is still " + string(e.status) }

// TestFrontDoorOnAResendKeepsTheKey: the first send bought and its reply
// was lost; every resend gets a confirmed 503, 408, 424 or 429 from the
// API's front door. The key is kept until its deadline, and the billing
// ledger finds the first send's charge: one purchase, no second key.
func TestFrontDoorOnAResendKeepsTheKey(t *testing.T) {
	t.Parallel()
	l, evs := resendAfter(t, sandbox.Faults{FrontDoor: 1})
	s := aggregate.Fold(evs)
	require.Equal(t, aggregate.StatusChargedNoResult, s.Status)
	require.Len(t, s.Attempts, 1, "no new key")
	require.Greater(t, s.Attempts[0].Tries, 1, "resent")
	require.Equal(t, 1, l.sb.Stats().ChargesPerKey[s.Attempts[0].Key])
	require.Positive(t, l.sb.Stats().Faults[sandbox.FaultFrontDoor])
}

// TestLostRecordCaughtLive: the first send bought and its reply was lost;
// the API lost the key's record, so the resend ran and billed the search
// again and answered 200 without the replay header. The result is stored,
// and the check of the key's charges records the API's double charge.
func TestLostRecordCaughtLive(t *testing.T) {
	t.Parallel()
	l, evs := resendAfter(t, sandbox.Faults{LostRecord: 1})
	s := aggregate.Fold(evs)
	require.Equal(t, aggregate.StatusSucceeded, s.Status)
	require.True(t, s.Result.CheckCharges)
	require.NotNil(t, s.Checked)
	require.Equal(t, aggregate.VerdictDoubleCharge, s.Checked.Verdict)
	require.Equal(t, 2, s.Checked.Charges)
	require.Equal(t, 2, l.sb.Stats().ChargesPerKey[s.Result.Key])
	require.Equal(t, aggregate.Purchases{Bought: 1, Doubled: 1}, aggregate.PurchasesOf(evs))
}

// TestReplayedResendNeedsNoCheck: a 200 replayed on the second send is the
// first send's execution, the only one: nothing to check.
func TestReplayedResendNeedsNoCheck(t *testing.T) {
	_, evs := resendAfter(t, sandbox.Faults{})
	s := aggregate.Fold(evs)
	require.Equal(t, aggregate.StatusSucceeded, s.Status)
	require.True(t, s.Result.Replayed)
	require.False(t, s.Result.CheckCharges)
	require.Nil(t, s.Checked)
}
