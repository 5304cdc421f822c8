// Package worker executes the decisions of package aggregate against the
// world: it takes schedule commands in (intake), wakes due jobs, claims them
// by appending Sent before the request leaves, calls the API, records the
// outcome together with the next action, and asks the billing ledger when a
// key's outcome can no longer be learned from the API (reconciliation).
//
// Every step starts from the job's log: load, fold, decide, append with the
// version that was loaded. Two deliveries of one job therefore cannot both
// claim it or both rotate its key: the second append fails with
// eventstore.ErrConcurrency and the loser reloads. A process may die between any
// two steps; the next worker resumes from the log with the same key.
//
// Run and RunIntake pull deliveries from JetStream consumers and hand each
// to Engine.HandleWork (a due job) or Engine.HandleCommand (a command).
// Those take any jetstream.Msg, and HandleCommand records rejections
// through any Rejections, so the deterministic simulation (package sim)
// drives the very handlers production runs, with messages of its own.
package engine
