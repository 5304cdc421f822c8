package chaos

import (
	"slices"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// Known engine bugs found by the simulation (package sim) and looked for
// here too, by the signature each leaves in a job's log and the provider's
// ledger. A chaos run reports a broken promise that has one of these
// signatures under the bug's name.
const (
	// BugReconcileWhileRunning: a key's last request was cut off (or timed
	// out) while the API was still running its search; the key reached its
	// deadline, the billing ledger was asked at once, found nothing yet,
	// and the job moved to a new key. The first search was billed when it
	// finished: two charges (promises 2 and 4).
	BugReconcileWhileRunning = "reconcile-while-running"
	// BugStaleTryRotates: an older try's confirmed answer that only speaks
	// for that one request (429 rate_limited: nothing ran, the key is not
	// recorded) arrived after a newer try of the same key had been sent,
	// and rotated the key; the newer try ran the search. Two charges
	// (promises 2 and 4).
	BugStaleTryRotates = "stale-try-rotates-key"
	// BugStaleSuccessHidesCharge: an older try's free result (a zero-result
	// search) was stored after a newer try of the same key had run the
	// search again (the provider had forgotten the unbilled first run); the
	// newer run was billed, and its charge is not in the log (promise 6).
	BugStaleSuccessHidesCharge = "stale-success-hides-charge"
)

// ClassifyCharge names the known bug behind a job's extra or unaccounted
// charge, or "" if it is none of them. perKey counts the provider's
// charges by key; chargedIDs, if not nil, returns the request ids of the
// charges of the job's keys (asked only when needed).
func ClassifyCharge(evs []events.Event, perKey map[string]int, chargedIDs func() []string) string {
	for i, e := range evs {
		switch d := e.Data.(type) {
		case events.Reconciled:
			if d.Verdict != aggregate.VerdictNotCharged {
				continue
			}
			for _, k := range d.Keys {
				if perKey[k] > 0 {
					return BugReconcileWhileRunning
				}
			}
		case events.KeyRotated:
			if i == 0 || perKey[d.OldKey] == 0 {
				continue
			}
			out, ok := evs[i-1].Data.(events.OutcomeClassified)
			if ok && out.Key == d.OldKey && out.Try < triesOf(evs[:i-1], d.OldKey) {
				return BugStaleTryRotates
			}
		}
	}
	s := aggregate.Fold(evs)
	if s.Status == aggregate.StatusSucceeded && s.Result != nil && chargedIDs != nil {
		ids := chargedIDs()
		if len(ids) == 1 && !slices.Contains(ids, s.Result.RequestID) {
			return BugStaleSuccessHidesCharge
		}
	}
	return ""
}

// triesOf is how often key was sent in evs.
func triesOf(evs []events.Event, key string) int {
	n := 0
	for _, e := range evs {
		if s, ok := e.Data.(events.Sent); ok && s.Key == key {
			n = max(n, s.Try)
		}
	}
	return n
}

// Accounted is how many charges a finished job's log says it bought: one
// for a stored observation with pages, one for charged_no_result, and one
// more per authorised re-purchase that was bought.
func Accounted(s aggregate.State) int {
	switch {
	case s.Status == aggregate.StatusChargedNoResult:
		return 1 + s.Repurchases
	case s.Status == aggregate.StatusSucceeded && s.Result != nil && s.Result.Pages > 0:
		return 1 + s.Repurchases
	}
	return s.Repurchases
}
