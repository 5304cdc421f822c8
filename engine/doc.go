// Package engine executes the decisions of package aggregate against the
// world: it takes schedule commands in (intake), wakes due jobs, claims them
// by appending Sent before the request leaves, calls the API, records the
// outcome together with the next action, and asks the billing ledger when a
// key's outcome can no longer be learned from the API (reconciliation). It
// also holds searches to their account's limits (Limiter), fires recurring
// schedules (Schedules) and re-arms lost timers (SweepJobs).
//
// Every step starts from the job's log: load, fold, decide, append with the
// version that was loaded. Two deliveries of one job therefore cannot both
// claim it or both rotate its key: the second append fails with
// eventstore.ErrConcurrency and the loser reloads. A process may die between
// any two steps; the next worker resumes from the log with the same key.
//
// The engine imports no NATS client. It declares the ports it needs where
// it uses them, and package nats implements them on JetStream: Store (the
// event log), Timers and Wakes (job timers), Bucket and WatchBucket (the
// buckets the engines share), ScheduleTimers and Orders (recurring
// schedules), Rejections (records of refused commands) and Msg (one
// delivery from a durable queue). The loops in nats/consume hand each
// delivery to a handler here (HandleWork, HandleCommand,
// HandleScheduleCommand, Schedules.HandleDue); the deterministic simulation
// (internal/sim) calls the same handlers with messages of its own, and the
// tests run the engine on eventstore/memstore and the fakes of package
// enginetest.
package engine
