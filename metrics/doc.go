// Package metrics is serpent's Prometheus registry: what an operator
// scrapes from /metrics of serpent run.
//
// Job-level figures (jobs by state, sends by outcome class, key rotations,
// reconciliations and their verdicts, billed pages, purchases and
// suspected double charges) are not counters threaded through the engine:
// they are read at scrape time from a projections.Tally, the fold of the
// event log itself (nats/projector.FollowTally feeds it), so they survive
// restarts, agree across every process that serves them and equal what an
// audit of the log would count. Until the tally has counted the log as it
// stood when its reader began, a scrape leaves its figures out, so that
// Prometheus never sees them fall back and take it for a counter reset:
// only serpent_metrics_log_seq and serpent_metrics_caught_up 0 are
// served. The projections' lag and the accounts' figures are read at
// scrape time through the functions Options gives.
//
// Only timings need hooks inside the process: Metrics is the engine's
// search observer (API latency by account and reply), wraps the event
// store (append latency) and takes the group committer's OnCommit (batch
// sizes and commit time).
//
// Nothing here ever sees the API token: metrics are built from events,
// results without their bodies and durations. Nothing here does I/O of
// its own either.
package metrics
