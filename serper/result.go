package serper

import (
	"encoding/json"
	"log/slog"
	"time"
)

// Result is what one Search call learned. It is plain data for the engine's
// pure aggregate: exactly one of Confirmed and Unknown != "" holds.
//
//	Confirmed  Status  Code                            engine's next step (default table)
//	false      0       ""      (Unknown says why)      resend the same key and body
//	true       409     idempotency_in_progress         resend the same key and body
//	true       503     billing_unavailable             resend the same key and body
//	true       408/424/503 (other codes)               persist a new key, resend the body
//	true       429     rate_limited                    wait RetryAfter, persist a new key
//	true       409     idempotency_replay_unavailable  reconcile with the ledger (RequestID is the original)
//	true       200     ""      (Search, Pages set)     store the observation
//	true       any other status                        record the failure (terminal)
type Result struct {
	// Confirmed is true when the reply was identified as the API's own: a
	// success body or the JSON error envelope, either with a request id.
	Confirmed bool
	// Status is the HTTP status when Confirmed, else 0.
	Status int
	// Code is the envelope's error code when Confirmed and Status != 200.
	Code string
	// Message is the envelope's message, token scrubbed.
	Message string
	// Fields names the invalid fields of a 422 invalid_request, if listed.
	Fields []string
	// RequestID is the API's request id when Confirmed. For
	// idempotency_replay_unavailable it is the id of the original execution.
	RequestID string
	// Replayed is true when a confirmed reply carried Idempotent-Replayed: true.
	Replayed bool
	// RetryAfter is the parsed Retry-After header (seconds or HTTP date) of
	// any reply, confirmed or not; 0 when absent or unparsable.
	RetryAfter time.Duration
	// Search is the compact success body of a confirmed 200, nil otherwise.
	Search json.RawMessage
	// Pages is the number of result pages with results a 200 reported; the
	// API bills these, after the account's free pages.
	Pages int
	// Unknown is "" when Confirmed, else one of the Unknown* reasons.
	Unknown string
	// Detail explains an unknown outcome for humans (token scrubbed).
	Detail string
	// RawStatus is the status line of whatever replied, even when the reply
	// was not identified (a gateway's 502, say); 0 when nothing replied. It is
	// for diagnostics only: decide on Status.
	RawStatus int
	// Latency is the time from the call to its outcome.
	Latency time.Duration
}

// OK reports whether r is a confirmed, decoded success.
func (r Result) OK() bool { return r.Confirmed && r.Status == 200 }

// LogValue lists r for log/slog without the (possibly large) Search body.
func (r Result) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Bool("confirmed", r.Confirmed)}
	if r.Confirmed {
		attrs = append(attrs, slog.Int("status", r.Status), slog.String("request_id", r.RequestID))
		if r.Code != "" {
			attrs = append(attrs, slog.String("code", r.Code))
		}
		if r.Replayed {
			attrs = append(attrs, slog.Bool("replayed", true))
		}
		if r.Status == 200 {
			attrs = append(attrs, slog.Int("pages", r.Pages))
		}
	} else {
		attrs = append(attrs, slog.String("unknown", r.Unknown), slog.String("detail", r.Detail))
		if r.RawStatus != 0 {
			attrs = append(attrs, slog.Int("raw_status", r.RawStatus))
		}
	}
	if r.RetryAfter > 0 {
		attrs = append(attrs, slog.Duration("retry_after", r.RetryAfter))
	}
	attrs = append(attrs, slog.Duration("latency", r.Latency))
	return slog.GroupValue(attrs...)
}

// unknown builds the Result of an outcome that cannot be confirmed.
func unknown(reason, detail string) Result {
	return Result{Unknown: reason, Detail: detail}
}
