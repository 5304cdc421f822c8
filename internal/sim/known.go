package sim

import (
	"context"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/chaos"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper"
)

// classify names the known engine bug (chaos.Bug*) behind a job's extra
// or unaccounted charge, or "" if it is none of them.
func (w *World) classify(evs []events.Event, s aggregate.State, perKey map[string]int) string {
	return chaos.ClassifyCharge(evs, perKey, func() []string { return w.chargedRequestIDs(s) })
}

// chargedRequestIDs asks the provider's ledger which executions of the
// job's keys were charged.
func (w *World) chargedRequestIDs(s aggregate.State) []string {
	var keys []string
	for _, a := range s.Attempts {
		keys = append(keys, a.Key)
	}
	entries, err := w.client.Ledger(context.Background(), serper.LedgerQuery{Keys: keys})
	if err != nil {
		w.rep.fail("job %s: ledger: %v", s.JobID, err)
		return nil
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.RequestID)
	}
	return ids
}

// knownOrFail records a broken promise as a failure, naming the bug it
// looks like (counted in Report.Known) when it has the signature of one
// the simulation found before.
func (w *World) knownOrFail(bug, format string, args ...any) {
	if bug != "" {
		w.rep.Known[bug]++
		format = bug + ": " + format
	}
	w.rep.fail(format, args...)
}
