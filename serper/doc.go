// Package serper is the client of the Serper.live search API, the paid
// provider serpent buys Google-SERP observations from.
//
// The client does one thing for the engine: it sends a stored request body
// under a stored attempt key and says, without guessing, what came back.
// Search never returns an error. It returns a Result, and a Result is either
// confirmed or unknown:
//
//   - Confirmed: the reply was identified as the API's own, a success body or
//     the API's JSON error envelope, each carrying a request id. Status, Code
//     and RequestID are then facts the engine may act on.
//   - Unknown: no reply, an unreadable or oversized reply, a gateway page, or
//     anything else that cannot be proven to come from the API. Status is 0
//     and Unknown names the reason. The search may or may not have run, so
//     the only safe next step is to resend the same key and body.
//
// A 200 counts only when its body decodes as a success body with a request
// id; a non-2xx counts only when its body is the error envelope with a
// request id. Everything else is unknown, however plausible its status line.
//
// The API may run a search for up to 90 s and asks clients to wait at least
// 100 s, so Config.Timeout defaults to 100 s and Validate refuses anything
// shorter: a deadline under 90 s turns searches that are still running (and
// will be billed) into unknown outcomes, and the 10 s beyond is the margin
// within which a search that left before its claim's lease less the
// timeout is over, and billed, when the lease ends.
//
// The bearer token is a secret. Config and Client print it as "[redacted]"
// in every fmt verb, in slog and in JSON, and every string the client builds
// from a reply or an error (Result.Message, Result.Detail, the Search body,
// *LedgerError) has the token scrubbed out, even if the server echoes it.
//
// Ledger looks up the provider's billing ledger by attempt key or request id.
// It is what the reconciler uses to learn whether an attempt with an unknown
// outcome, or one answered with idempotency_replay_unavailable, was charged.
//
// The package serper/sandbox is a simulator of the same API with seeded
// faults; the contract tests of this package run the client against it.
package serper
