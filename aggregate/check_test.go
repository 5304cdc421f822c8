package aggregate_test

import (
	"testing"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/stretchr/testify/require"
)

// unproven returns a job whose key's answer was lost, then accepted on the
// resend: a 200 the log cannot prove was the key's only execution.
func unproven(t *testing.T, replayed bool, sends int) (*job, string) {
	j := newJob(t)
	key, try := j.send("w1")
	for i := 1; i < sends; i++ {
		j.must(aggregate.Outcome{Key: key, Try: try, Unknown: "connection_reset"})
		j.waitDue()
		key, try = j.send("w1")
	}
	evs := j.must(aggregate.Outcome{Key: key, Try: try, Status: 200, RequestID: "r2", Replayed: replayed, Result: okResult, Pages: 1})
	require.Equal(t, []string{"ObservationStored"}, types(evs))
	return j, key
}

func TestWhichResultsAreChecked(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replayed bool
		sends    int
		check    bool
	}{
		{"first send", false, 1, false},
		{"replayed on the second send", true, 2, false},
		{"not replayed on a resend", false, 2, true},
		{"replayed after two lost answers", true, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, _ := unproven(t, tc.replayed, tc.sends)
			require.Equal(t, tc.check, j.s.Result.CheckCharges)
			require.Equal(t, tc.check, j.s.CheckPending)
			require.Equal(t, aggregate.StatusSucceeded, j.s.Status, "the result is stored at once")
			if !tc.check {
				require.Equal(t, aggregate.StepDone, j.s.Next(j.now).Step)
			}
			require.Empty(t, aggregate.Verify(j.log))
		})
	}
}

// TestChargesCheckedOnceSettled: the engine asks the ledger about the key
// once its searches have ended, and records one verdict.
func TestChargesCheckedOnceSettled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries func(key string) []events.LedgerEntry
		verdict string
		doubled int
	}{
		{"one charge", func(key string) []events.LedgerEntry {
			return []events.LedgerEntry{{RequestID: "r1", Key: key, Pages: 1, BilledPages: 1}}
		}, aggregate.VerdictConfirmed, 0},
		{"two charges: the API bought twice", func(key string) []events.LedgerEntry {
			return []events.LedgerEntry{{RequestID: "r1", Key: key, Pages: 1, BilledPages: 1}, {RequestID: "r2", Key: key, Pages: 1, BilledPages: 1}}
		}, aggregate.VerdictDoubleCharge, 1},
		{"found twice, counted once", func(key string) []events.LedgerEntry {
			e := events.LedgerEntry{RequestID: "r2", Key: key, Pages: 1, BilledPages: 1}
			return []events.LedgerEntry{e, e}
		}, aggregate.VerdictConfirmed, 0},
		{"none yet (free pages)", func(string) []events.LedgerEntry { return nil }, aggregate.VerdictConfirmed, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, key := unproven(t, false, 2)
			next := j.s.Next(j.now)
			require.Equal(t, aggregate.Next{Step: aggregate.StepWait, At: j.s.Settled()}, next, "the last send's search may still run")
			q := j.s.ReconcileQuery()
			require.Equal(t, []string{key}, q.Keys)
			require.Equal(t, []string{"r2"}, q.RequestIDs)
			_, err := j.try(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs, Entries: tc.entries(key)})
			var ns *aggregate.NotSettledError
			require.ErrorAs(t, err, &ns, "too early")

			j.waitDue()
			require.Equal(t, aggregate.StepReconcile, j.s.Next(j.now).Step)
			_, err = j.try(aggregate.LedgerAnswer{Keys: q.Keys})
			require.ErrorIs(t, err, aggregate.ErrInvalidInput, "an answer must cover the request ids")
			evs := j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs, Entries: tc.entries(key)})
			require.Equal(t, []string{"ChargesChecked"}, types(evs))
			c := evs[0].Data.(events.ChargesChecked)
			require.Equal(t, tc.verdict, c.Verdict)
			require.Equal(t, key, c.Key)
			require.Equal(t, aggregate.StatusSucceeded, j.s.Status)
			require.False(t, j.s.CheckPending)
			require.Equal(t, aggregate.StepDone, j.s.Next(j.now).Step)
			require.Equal(t, aggregate.Purchases{Bought: 1, Doubled: tc.doubled}, aggregate.PurchasesOf(j.log))
			require.Empty(t, aggregate.Verify(j.log))

			// Run again (a retry, another engine): nothing more to record.
			_, err = j.try(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs, Entries: tc.entries(key)})
			require.ErrorIs(t, err, aggregate.ErrTerminal)
		})
	}
}

func TestVerifyFlagsChecks(t *testing.T) {
	t.Run("an unproven result not marked", func(t *testing.T) {
		j, _ := unproven(t, false, 2)
		last := &j.log[len(j.log)-1]
		d := last.Data.(events.ObservationStored)
		d.CheckCharges = false
		last.Data = d
		require.Equal(t, []string{aggregate.RuleCheckUnproven}, ruleNames(aggregate.Verify(j.log)))
	})
	t.Run("a check nobody asked for", func(t *testing.T) {
		j, key := unproven(t, false, 1)
		j.record(events.ChargesChecked{Key: key, Verdict: aggregate.VerdictConfirmed})
		require.Contains(t, ruleNames(aggregate.Verify(j.log)), aggregate.RuleAfterTerminal)
	})
	t.Run("a verdict its charges do not make", func(t *testing.T) {
		j, key := unproven(t, false, 2)
		j.record(events.ChargesChecked{Key: key, Charges: 2, Verdict: aggregate.VerdictConfirmed,
			Entries: []events.LedgerEntry{{RequestID: "a", Key: key}, {RequestID: "b", Key: key}}})
		require.Equal(t, []string{aggregate.RuleCheckUnproven}, ruleNames(aggregate.Verify(j.log)))
	})
}
