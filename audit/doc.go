// Package audit checks serpent's promises (docs/reliability.md) from the log
// alone, and against the provider's billing ledger when one is given. It
// is pure: the caller reads SERP_EVENTS, SERP_COMMANDS, SERP_REJECTED and
// the ledger, and passes what it read and the time.
//
// Per job, CheckJob runs aggregate.Verify (gapless versions, keys persisted
// before use, one body, never past a key's deadline, only the current key,
// a definite outcome before a new key, an outcome only of the current key's
// latest send, one sender, at most one purchase unless authorised, nothing
// after a terminal state) and adds one rule of its own, terminal_or_pending:
// a job that is not finished must be legitimately pending at the audit's
// time (see Pending).
//
// An Auditor gathers the jobs into a Report and adds the checks that need
// more than one job: every command became a job or a rejection
// (command_handled), and, joined with the billing ledger by key and
// request id, one charge per accepted first execution
// (one_charge_per_execution), every charge explained (charge_explained) and
// no job charged more often than it was allowed to buy
// (ledger_at_most_one_purchase).
//
// CheckLog replays a whole log (a Log: SERP_EVENTS or a recording, which
// package nats reads and decodes) in little memory, checking each job as
// soon as it is finished.
package audit
