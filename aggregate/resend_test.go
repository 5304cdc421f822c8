package aggregate_test

import (
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/stretchr/testify/require"
)

// frontDoor are the confirmed errors an API may answer before it looks a
// key up: they speak only of the request that got them.
var frontDoor = []aggregate.Outcome{
	{Status: 503, Code: "service_unavailable", RequestID: "r2"},
	{Status: 408, Code: "search_timeout", RequestID: "r2"},
	{Status: 424, Code: "upstream_failed", RequestID: "r2"},
	{Status: 429, Code: "rate_limited", RequestID: "r2", RetryAfter: 5 * time.Second},
}

// TestResendKeepsKeyUnlessReplayed: after a send whose answer was lost, a
// confirmed error on the resend keeps the key unless the API replayed it.
// The first send may have bought; a new key would buy again.
func TestResendKeepsKeyUnlessReplayed(t *testing.T) {
	for _, out := range frontDoor {
		t.Run(out.Code, func(t *testing.T) {
			j := newJob(t)
			key, try := j.send("w1")
			j.must(aggregate.Outcome{Key: key, Try: try, Unknown: "connection_reset"})
			j.waitDue()
			key, try = j.send("w1")
			require.Equal(t, 2, try)
			out.Key, out.Try = key, try
			evs := j.must(out)
			require.Equal(t, []string{"OutcomeClassified"}, types(evs), "no new key")
			oc := evs[0].Data.(events.OutcomeClassified)
			require.Equal(t, string(aggregate.ActionRetrySameKey), oc.Action)
			require.Equal(t, key, j.key())
			cur, _ := j.s.Current()
			require.True(t, cur.Unresolved(), "the key may still have bought")
			require.Empty(t, aggregate.Verify(j.log))

			// Replayed, the same error is the key's own: a new key is safe.
			j.waitDue()
			key, try = j.send("w1")
			out.Key, out.Try, out.Replayed = key, try, true
			if out.Status == 429 {
				return // a 429 is never a replay (nothing ran); see TestReplayedErrorRotates
			}
			evs = j.must(out)
			require.Equal(t, []string{"OutcomeClassified", "KeyRotated"}, types(evs))
			require.Empty(t, aggregate.Verify(j.log))
		})
	}
}

// TestResendErrorsUntilDeadlineReconcile: a key whose resends get only
// front-door errors is sent until its deadline, and the billing ledger
// then finds the first send's charge: charged_no_result, not a second
// purchase.
func TestResendErrorsUntilDeadlineReconcile(t *testing.T) {
	j := newJob(t)
	key, try := j.send("w1")
	j.must(aggregate.Outcome{Key: key, Try: try, Unknown: "connection_reset"})
	for i := 0; j.s.Status != aggregate.StatusReconciling; i++ {
		j.waitDue()
		evs := j.must(aggregate.Due{Worker: "w1"})
		sent, ok := evs[0].Data.(events.Sent)
		if !ok {
			require.Equal(t, events.TypeDeadlineReached, evs[0].Type())
			break
		}
		require.Equal(t, key, sent.Key)
		out := frontDoor[i%len(frontDoor)]
		out.Key, out.Try = sent.Key, sent.Try
		j.must(out)
	}
	require.Equal(t, key, j.key(), "one key all along")
	j.waitDue()
	q := j.s.ReconcileQuery()
	j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs,
		Entries: []events.LedgerEntry{{RequestID: "r1", Key: key, Pages: 1, BilledPages: 1}}})
	require.Equal(t, aggregate.StatusChargedNoResult, j.s.Status)
	require.Equal(t, 1, len(j.s.Attempts))
	require.Empty(t, aggregate.Verify(j.log))
}

// TestDecisionNeverRotatesOnAResend holds the rule for every row a
// deployment could write: whatever the table says, an answer to a resend
// that is not replayed never mints a new key.
func TestDecisionNeverRotatesOnAResend(t *testing.T) {
	custom, err := aggregate.ParseRules([]byte(`[
		{"status":500,"class":"retryable","action":"retry_new_key"},
		{"status":409,"code":"quota_reset","class":"rate_limited","action":"retry_new_key"}]`))
	require.NoError(t, err)
	for _, tb := range []aggregate.Table{aggregate.DefaultTable(), custom} {
		def := tb.Default
		def.Status = 599 // a status no row names
		for _, r := range append(tb.Rules, def) {
			for try := 2; try <= 3; try++ {
				d := tb.Decision(r.Status, r.Code, try, false)
				require.NotEqual(t, aggregate.ActionRetryNewKey, d.Action, "row %d %q on try %d", r.Status, r.Code, try)
			}
			require.Equal(t, r.Action, tb.Decision(r.Status, r.Code, 1, false).Action, "a first send takes its row")
			require.Equal(t, r.Action, tb.Decision(r.Status, r.Code, 2, true).Action, "a replay takes its row")
		}
	}
}

// TestReplayedErrorRotates: an error replayed on a resend is the key's
// first execution's: the key did not buy, and a new one may.
func TestReplayedErrorRotates(t *testing.T) {
	j := newJob(t)
	key, try := j.send("w1")
	j.must(aggregate.Outcome{Key: key, Try: try, Unknown: "connection_reset"})
	j.waitDue()
	key, try = j.send("w1")
	evs := j.must(aggregate.Outcome{Key: key, Try: try, Status: 408, Code: "search_timeout", RequestID: "r1", Replayed: true})
	require.Equal(t, []string{"OutcomeClassified", "KeyRotated"}, types(evs))
	require.Empty(t, aggregate.Verify(j.log))
}
