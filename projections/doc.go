// Package projections turns job histories into the views readers need:
// the status of each job (serp_status), the ledger of what was bought per
// key, job and day (serp_ledger), and the stored observations
// (serp_observations). The reducers are pure: Projection.Fold takes a
// value and the events that change it and returns the next value, and
// each value keeps the stream sequence of the last event applied to it,
// so applying an event twice changes nothing and a projection always
// equals a fold of the log (Build) and can be rebuilt from sequence 1.
//
// The value formats are public, documented field by field in
// docs/projections.md, for dashboards and the nats CLI.
package projections
