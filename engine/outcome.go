package engine

import (
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper"
)

// outcomeOf tells the aggregate what one send learned. A status is passed
// only when the client identified the reply as the API's own.
func outcomeOf(key string, try int, r serper.Result) aggregate.Outcome {
	o := aggregate.Outcome{Key: key, Try: try, RetryAfter: r.RetryAfter}
	if !r.Confirmed {
		o.Unknown = r.Unknown
		if o.Unknown == "" {
			o.Unknown = "unknown"
		}
		return o
	}
	// The message is for people; however long an API (or another
	// client) made it, it may not keep the outcome out of the log.
	o.Status, o.Code, o.Message = r.Status, r.Code, serper.ClipMessage(r.Message)
	o.RequestID, o.Replayed = r.RequestID, r.Replayed
	if r.Status == 200 {
		o.Result, o.Pages = r.Search, r.Pages
	}
	return o
}

// answerOf turns ledger entries into the aggregate's ledger answer.
func answerOf(q aggregate.ReconcileQuery, entries []serper.LedgerEntry) aggregate.LedgerAnswer {
	a := aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs}
	for _, e := range entries {
		a.Entries = append(a.Entries, events.LedgerEntry{
			RequestID: e.RequestID, Key: e.IdempotencyKey, Pages: e.Pages,
			BilledPages: e.BilledPages, AmountMicros: e.AmountMicros, At: e.At.UTC(),
		})
	}
	return a
}
