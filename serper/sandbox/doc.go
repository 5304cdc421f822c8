// Package sandbox simulates the Serper.live search API: its contract (the
// README's "The retry contract"), a billing ledger, statistics, and seeded
// faults. Tests, the demo, chaos runs and benchmarks talk to it instead of
// the paid API.
//
// # Endpoints
//
//	POST /v1/search                 the search (bearer token, Idempotency-Key: a UUID)
//	GET  /v1/billing/ledger         ?idempotencyKey=K&requestId=R&day=YYYY-MM-DD (repeatable, or comma lists;
//	                                a day lists every charge of that UTC day)
//	GET  /v1/sandbox/stats          counters (see Stats); bearer token too
//
// # Keys
//
// Each Idempotency-Key goes through running, finished and expired:
//
//   - A fresh key is validated (401 and 422 are answered before the key is
//     recorded: they are not executions, not billed, not cached), then
//     recorded as running and executed. Others sending the key meanwhile get
//     409 idempotency_in_progress.
//   - A finished key replays its first response (status and body, success or
//     failure) with Idempotent-Replayed: true, for ReplayWindow from the
//     execution's start. A different body under a known key still gets the
//     original response and counts as a body violation in Stats.
//   - Past the window, or after an EarlyExpiry fault, the cached response is
//     gone. A billed key (one with a ledger entry: the search returned pages
//     with results) then answers 409 idempotency_replay_unavailable with the
//     original requestId, forever. An unbilled key (a failure, a zero-result
//     search) is forgotten: the next request with it runs a fresh search.
//   - A key whose charge is late (the BillingLate fault) answers 503
//     billing_unavailable with the original requestId, inside the window or
//     past it, until its ledger entry is written; it is never forgotten.
//
// A search runs for SearchTime (SlowSearchTime under the SlowSearch fault),
// detached from the request: a client that hangs up does not stop it, and it
// is still billed and cached. Closing the server stops running searches.
//
// # Billing
//
// A search with results bills its pages (ceil(limit/10)): the account's free
// pages first, then PriceMicros per page. It gets exactly one ledger entry,
// even when all its pages were free. Zero-result searches and failures cost
// nothing and have no entry. Queries starting with ZeroResultsPrefix always
// have zero results.
//
// A charge is written when its search ends, except under BillingLate:
// BillingDelay (default 30 s) later. The ledger then lags the replies, as
// the real API's may. Late charges are written, dated when they fell due
// and in that order, by whatever first looks after that moment (a search
// request, a ledger query, Stats), so they follow a fake clock too.
//
// # Faults
//
// Each fault has a probability in Faults. Draws come from a math/rand source
// seeded with Seed (BillingLate's from a second one), in a fixed order per
// request, whatever the probabilities, so a seed replays the same fault
// sequence for the same order of requests; concurrent clients change that
// order, and so the sequence. What each fault does:
//
//   - DropBeforeSearch, GatewayPage502: checked on every search request,
//     before authentication and the key lookup. The connection is closed
//     without a reply, or an HTML 502 page is sent. Nothing runs, nothing is
//     recorded: a resend of a fresh key runs it for the first time, a resend
//     of a known key replays as usual.
//   - RateLimited429: fresh keys only. A confirmed 429 rate_limited with
//     Retry-After; nothing runs and the key is not recorded. Known keys are
//     never rate limited: a 429 on a key that was billed would tempt a client
//     into buying again under a new key.
//   - SlowSearch: the search takes SlowSearchTime (default 110 s, longer than
//     any client's 100 s timeout); the key is in progress meanwhile.
//   - Timeout408, Failed424, Unavailable503: the execution fails with 408
//     search_timeout, 424 upstream_failed or 503 service_unavailable. It is
//     not billed, and its failure is the cached first response: a same-key
//     resend replays it.
//   - ZeroResults: the search succeeds with "organic":[] and "pages":0; free.
//   - BillingUnavailable503 (searches with results only): the search ran, its
//     result is cached and it is billed, but this reply is 503
//     billing_unavailable carrying the execution's requestId. The 503 is not
//     the cached response: a same-key resend replays the 200 (and the ledger
//     shows the single charge), so the original settles without a second
//     charge. (Not so under BillingLate, below.)
//   - DropAfterSearch: the search ran and its response was cached (and
//     billed, if it had results), then the connection is closed without a
//     reply. A resend replays the cached response.
//   - GatewayPage504: like DropAfterSearch, but an HTML 504 page is sent.
//   - EarlyExpiry: when the search finishes, its cached response is dropped
//     at once (the reply in flight is still sent). The next resend of a
//     billed key gets idempotency_replay_unavailable; of an unbilled key, a
//     fresh search.
//   - BillingLate (searches with results only; it implies
//     BillingUnavailable503, which it is also counted as): the search ran and
//     its result is cached, the reply is 503 billing_unavailable, and its
//     ledger entry is written only BillingDelay after the search ended.
//     Until then the original is unresolved: the ledger has no entry for the
//     key or its requestId, and every same-key resend gets 503
//     billing_unavailable again (counted in Stats.BillingUnsettled), never
//     the 200. Once the entry is written, resends replay the 200 (or, past
//     the window or after EarlyExpiry, get idempotency_replay_unavailable).
//     It is drawn from a source of its own (seeded from Seed), so switching
//     it on leaves every other fault of a seeded run where it was; its
//     probability is 0 unless set.
//   - FrontDoor: checked on every search request after authentication,
//     before the key is looked up. A confirmed JSON error of the API (503
//     service_unavailable, 408 search_timeout, 424 upstream_failed or 429
//     rate_limited with Retry-After, drawn evenly) with a request id of
//     its own, never replayed. Nothing runs and nothing is recorded, also
//     for a resend of a key that already bought. It speaks only of this
//     request. Drawn from a source of its own.
//   - LostRecord: a request for a finished, billed key whose response is
//     still cached or already gone finds the key's record lost. The API
//     runs the search again, bills it again and answers 200 without the
//     replay header: the API's own double purchase. The run always has
//     results; its reply is lost with DropAfterSearch's probability. Drawn
//     from a source of its own.
//
// The faults after the search (BillingUnavailable503, BillingLate,
// DropAfterSearch, GatewayPage504) only alter the reply to the request that
// started the execution (and BillingLate the time of its charge); none of
// them ever causes a second execution of a known key; only LostRecord does.
// SetFaults changes the probabilities of a running server, which lets a test
// walk one key through several faults in turn; SetSearchTime changes how
// long the searches that start from then on run.
package sandbox
