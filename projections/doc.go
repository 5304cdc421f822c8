// Package projections turns job histories into the views readers need:
// the status of each job, the ledger of what was bought, and the stored
// observations. The reducers here are pure: they take events and return
// values, so a projection always equals a fold of the log and can be
// rebuilt from sequence 1.
package projections
