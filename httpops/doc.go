// Package httpops is the HTTP server of serpent run: a status page (/),
// the Prometheus metrics (/metrics, package metrics), liveness (/healthz)
// and readiness (/readyz).
//
// The status page shows the engine's fold of the log (a
// projections.Tally): jobs by state, double charges, the reconciliation
// queue and the recent jobs, with their details from serp_status, the
// billed pages and spend of the last two weeks from serp_ledger, and the
// API accounts' spend and limits. Readiness checks the NATS connection,
// the engine's streams and buckets, the accounts' refused limits and the
// projections' lag. Everything is read at each request through a Source,
// which the engine implements over its NATS connection: this package
// does no I/O of its own but HTTP.
package httpops
