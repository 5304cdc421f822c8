// Package metrics is serpent's Prometheus registry: what an operator
// scrapes from /metrics of serpent run.
//
// Job-level figures (jobs by state, sends by outcome class, key rotations,
// reconciliations and their verdicts, billed pages, purchases and
// suspected double charges) are not counters threaded through the engine:
// a Tally folds them from the event log itself (Follow reads SERP_EVENTS
// with an ordered consumer from where the Tally stands), so they survive restarts,
// agree across every process that serves them and equal what an audit of
// the log would count. serpent run's Tally lets a finished job go once it
// has counted it, so its memory follows the jobs in flight; Follow loads
// a finished job's events back for the rare event that comes for it
// later. A Tally is written out (Checkpoint) into the serp_metrics
// bucket as it goes (KeepCheckpoint), and a process that starts resumes
// from there (Resume) rather than folding the log from its start. Until
// the Tally has counted the log as it stood when Follow began, a scrape
// leaves its figures
// out, so that Prometheus never sees them fall back and take it for a
// counter reset: only serpent_metrics_log_seq and
// serpent_metrics_caught_up 0 are served. The projections' lag is read
// from the server at scrape time.
//
// Only timings need hooks inside the process: Metrics is the engine's
// search observer (API latency by account and reply), wraps the event
// store (append latency) and takes the group committer's OnCommit (batch
// sizes and commit time).
//
// Nothing here ever sees the API token: metrics are built from events,
// results without their bodies and durations.
package metrics
