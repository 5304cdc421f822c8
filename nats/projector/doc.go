// Package projector keeps serpent's projections (the KV buckets
// serp_status, serp_ledger and serp_observations) up to date with the
// event log, rebuilds them from sequence 1, and folds the log into an
// engine's tally.
//
// Runner applies the pure reducers of package projections to SERP_EVENTS
// with the durable consumer serpent-projections. Each value remembers the
// stream sequence of the last event applied to it and is written with a
// compare-and-set on its KV revision, so an event is applied exactly once
// however often it is delivered; a lease in serp_projections lets one
// runner apply at a time, whichever engine process it runs in. Lag and
// ReadLag say how far the projections trail the log.
//
// FollowTally feeds an engine's projections.Tally (its /metrics, status
// page and index of jobs in flight for the sweep) from the log, and
// ResumeTally, SaveTallyCheckpoint and KeepTallyCheckpoint keep the
// tally's checkpoint in serp_metrics, so that an engine that starts
// resumes the fold rather than read the whole log.
//
// Rebuild folds the whole log into staging buckets and switches the live
// buckets over key by key while the runners pause, so a reader never sees
// a missing or half-built value.
//
// Every read of the log goes through the one reader of package nats
// (nats.Log), which serpent audit uses too (nats.AuditLog).
//
// docs/auditors.md documents the buckets' keys and values, the
// guarantees and the figures.
package projector
