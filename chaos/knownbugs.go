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

// Books is what the provider's books say one job bought, to hold against
// its log.
type Books struct {
	// Keys are the job's keys the provider charged: more than one plus the
	// authorised re-purchases is a double charge by serpent (promise 2).
	Keys int
	// Charges are every charge of the job's keys.
	Charges int
	// Doubled are the charges beyond the first under one key: the API's
	// own double purchases, which the log must find live (promise 9).
	Doubled int
}

// BooksOf reads a job's charges from the provider's charges by key.
func BooksOf(s aggregate.State, perKey map[string]int) Books {
	var b Books
	for _, a := range s.Attempts {
		if n := perKey[a.Key]; n > 0 {
			b.Keys++
			b.Charges += n
			b.Doubled += n - 1
		}
	}
	return b
}

// Accounted is how many charges a finished job's log says were made: one
// for a stored observation with pages, one for charged_no_result, one
// more per authorised re-purchase that was bought, and every double
// charge of the API the log found.
func Accounted(evs []events.Event, s aggregate.State) int {
	n := s.Repurchases
	switch {
	case s.Status == aggregate.StatusChargedNoResult:
		n++
	case s.Status == aggregate.StatusSucceeded && s.Result != nil && s.Result.Pages > 0:
		n++
	}
	return n + aggregate.PurchasesOf(evs).Doubled
}
