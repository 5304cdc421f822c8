package projections_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
)

// TestJobLedgerCountsEveryDistinctCharge: a reconciliation that finds two
// charges is two purchases (a promise broken, which the ledger must show
// as the audit does); a later reconciliation that finds an earlier charge
// again adds only the new one.
func TestJobLedgerCountsEveryDistinctCharge(t *testing.T) {
	charge := func(id string) events.LedgerEntry {
		return events.LedgerEntry{RequestID: id, Key: "k-" + id, Pages: 1, BilledPages: 1}
	}
	for _, tt := range []struct {
		name string
		recs []events.Reconciled
		want int
	}{
		{"two charges at once", []events.Reconciled{{Verdict: aggregate.VerdictCharged, Charges: 2, Entries: []events.LedgerEntry{charge("a"), charge("b")}}}, 2},
		{"found again after a re-purchase", []events.Reconciled{
			{Verdict: aggregate.VerdictCharged, Charges: 1, Entries: []events.LedgerEntry{charge("a")}},
			{Verdict: aggregate.VerdictCharged, Charges: 2, Entries: []events.LedgerEntry{charge("a"), charge("b")}},
		}, 2},
		{"no charge", []events.Reconciled{{Verdict: aggregate.VerdictNotCharged}}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var log []events.Event
			for i, r := range tt.recs {
				log = append(log, events.Event{JobID: "j", Version: uint64(i + 1), Data: r})
			}
			var recs []projections.Record
			for i, e := range log {
				recs = append(recs, projections.Record{Seq: uint64(i + 1), Event: e})
			}
			p := projections.New(projections.Config{})
			v, _, err := p.Fold(projections.JobTarget("j"), nil, recs)
			require.NoError(t, err)
			var j projections.JobLedger
			require.NoError(t, json.Unmarshal(v, &j))
			require.Equal(t, tt.want, j.Purchases)
			require.Equal(t, aggregate.PurchasesOf(log).Bought, j.Purchases, "as the audit counts")
		})
	}
}
