package serper

// Error codes of the Serper.live error envelope, as Result.Code carries them.
const (
	CodeUnauthorized                 = "unauthorized"                   // 401: missing or wrong token
	CodeInvalidRequest               = "invalid_request"                // 422: bad body or header; Result.Fields names them
	CodeSearchTimeout                = "search_timeout"                 // 408: the search ran out of time, nothing billed
	CodeUpstreamFailed               = "upstream_failed"                // 424: a dependency of the search failed
	CodeServiceUnavailable           = "service_unavailable"            // 503: the API could not run the search
	CodeBillingUnavailable           = "billing_unavailable"            // 503: billing could not settle; the original may be unresolved
	CodeIdempotencyInProgress        = "idempotency_in_progress"        // 409: the key's first execution is still running
	CodeIdempotencyReplayUnavailable = "idempotency_replay_unavailable" // 409: billed, but the cached response is gone
	CodeRateLimited                  = "rate_limited"                   // 429: slow down; see Result.RetryAfter
)

// HTTP headers of the contract.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
	HeaderRequestID      = "X-Request-Id"
	HeaderRetryAfter     = "Retry-After"
)

// Reasons an outcome is unknown, as Result.Unknown carries them. Every one of
// them means the same thing to the engine (the search may or may not have
// run); the reason is for logs, metrics and tests.
const (
	UnknownNotSent         = "not_sent"         // the request never left: invalid key or body, or ctx already done
	UnknownTimeout         = "timeout"          // the deadline passed before a full reply arrived
	UnknownCanceled        = "canceled"         // the caller's ctx was canceled during the exchange
	UnknownConnection      = "connection"       // refused, reset or closed before a reply arrived
	UnknownGatewayPage     = "gateway_page"     // an HTML page or a bare 502/503/504 from something in front of the API
	UnknownUnreadableBody  = "unreadable_body"  // the reply started but its body could not be read
	UnknownTruncatedBody   = "truncated_body"   // the body ended early (short of Content-Length, or cut-off JSON)
	UnknownOversizedBody   = "oversized_body"   // the body is larger than Config.MaxResponseBytes
	UnknownUnexpectedReply = "unexpected_reply" // a reply that is not the API's: no request id, wrong shape or status
)
