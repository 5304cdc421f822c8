// Package projections turns job histories into the views readers need:
// the status of each job (serp_status), the ledger of what was bought per
// key, job and day (serp_ledger), and the stored observations
// (serp_observations). The reducers are pure: Projection.Fold takes a
// value and the events that change it and returns the next value, and
// each value keeps the stream sequence of the last event applied to it,
// so applying an event twice changes nothing and a projection always
// equals a fold of the log (Build) and can be rebuilt from sequence 1.
//
// A Tally folds the whole log into running totals (jobs by state, sends
// by outcome, purchases, double charges), the jobs waiting for the billing
// ledger and the index of jobs in flight (LiveJobs) that the sweep for
// lost timers reads. A tally that forgets finished jobs holds only the
// jobs in flight. Its checkpoint (Checkpoint, RestoreCheckpoint) is bytes;
// nats/projector keeps it in the serp_metrics bucket.
//
// The value formats are public, documented field by field in
// docs/auditors.md, for dashboards and the nats CLI.
package projections
