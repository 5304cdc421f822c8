package projections_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// lostTwice is a job billed and its answer lost (charged_no_result), bought
// again by an operator, and that answer lost too: its second
// reconciliation lists only the new charge.
func lostTwice(t *testing.T, ids *projectionstest.IDs) []events.Event {
	j := projectionstest.NewJob(t, ids, "kettle", projectionstest.T0)
	lost := func(reqID string) {
		j.Send()
		j.Reply(aggregate.Outcome{Status: 409, Code: "idempotency_replay_unavailable", RequestID: reqID})
		key, _ := j.Key()
		j.Now = j.S.Settled()
		q := j.S.ReconcileQuery()
		entries := []events.LedgerEntry{{RequestID: reqID, Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: j.Now}}
		if reqID == "req_k2" { // the ledger shows the first charge too
			first := aggregate.Fold(j.Log).Attempts[0].Key
			entries = append(entries, events.LedgerEntry{RequestID: "req_k1", Key: first, Pages: 1, BilledPages: 1, AmountMicros: 1000})
		}
		j.Do(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs, Entries: entries})
	}
	lost("req_k1")
	j.Now = j.Now.Add(time.Minute)
	j.Do(aggregate.AuthorizeRepurchase{By: "ops", Reason: "needed"})
	lost("req_k2")
	require.Equal(t, aggregate.StatusChargedNoResult, j.S.Status)
	require.Empty(t, aggregate.Verify(j.Log))
	return j.Log
}

// TestPurchasesCountedAlike: the audit (aggregate.PurchasesOf), the job
// ledger in serp_ledger and the metrics' tally count the same purchases
// for every job, and the day ledgers the same charged pages as the job
// ledgers.
func TestPurchasesCountedAlike(t *testing.T) {
	jobs := projectionstest.SampleLog(t)
	jobs = append(jobs, lostTwice(t, projectionstest.IDsFrom(1000)))
	values, err := projections.New(projections.Config{}).Build(projectionstest.Interleave(jobs))
	require.NoError(t, err)

	jobPages := 0
	for _, log := range jobs {
		id := log[0].JobID
		var ledger projections.JobLedger
		require.NoError(t, json.Unmarshal(values[projections.JobTarget(id)], &ledger))
		tally := projections.NewTally()
		for i, e := range log {
			tally.Apply(projections.Record{Seq: uint64(i + 1), Event: e})
		}
		want := aggregate.PurchasesOf(log).Bought
		require.Equal(t, want, ledger.Purchases, "job %s: serp_ledger", id)
		require.EqualValues(t, want, tally.Counts().Purchases, "job %s: the metrics", id)
		for _, c := range ledger.Charges {
			jobPages += c.BilledPages
		}
	}
	require.Equal(t, 2, aggregate.PurchasesOf(jobs[len(jobs)-1]).Bought, "the job bought twice, once authorised")

	dayPages := 0
	for target, v := range values {
		if strings.HasPrefix(target.Key, projections.LedgerDayPrefix) {
			var day projections.DayLedger
			require.NoError(t, json.Unmarshal(v, &day))
			dayPages += day.ChargedPages
		}
	}
	require.Equal(t, jobPages, dayPages, "charged pages, by day and by job")
}
