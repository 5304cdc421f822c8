// Package chaos runs serpent as real processes under faults and checks its
// promises afterwards, the way Jepsen tests a system: serpent chaos is its
// command, docs/reliability.md its manual.
//
// Run starts a NATS server (serpent nats-server, fsync on every write), a
// sandbox of the Serper.live API with a seeded fault mix (serpent sandbox)
// and several workers (serpent run), each a process in its own process
// group that dies with the orchestrator. It publishes the jobs (some
// twice, in another spelling; some malformed) while it kills workers with
// SIGKILL, freezes them with SIGSTOP past their lease and restarts the NATS
// server, at random moments drawn from a seed. Once every job is finished,
// or the chaos phase is over, the faults stop and every job must finish
// within a bound. Then it reads serpent's streams whole (SERP_COMMANDS,
// SERP_REJECTED, SERP_EVENTS) and, once no search runs there, the
// sandbox's books, and checks:
//
//   - every job finished, and aggregate.Verify holds for its log (keys
//     persisted before use, one body, never past a deadline, a new key
//     only after a definite outcome, gapless, ...);
//   - by the sandbox's ledger, no job charged twice (by its keys, and by its
//     body, whatever key did it), every charge accounted for by the log,
//     every charged key stored by a job, no charged execution started past
//     its key's deadline, no body changed under a key;
//   - every acknowledged command is in SERP_COMMANDS and is the job the
//     run drew it for, or has exactly one rejection record with the reason
//     the run drew for it (not one the engine's own rules give it) and its
//     payload;
//   - the pluggable checks (DefaultChecks): serpent audit clean, and every
//     value of serp_status, serp_ledger and serp_observations equal to a
//     fold of the log, both ways (no value missing, none extra).
//
// A worker that ends by itself (a panic, any end that is not the run's own
// SIGKILL or its SIGTERM at the end) is restarted, and is a violation
// naming its exit status and the end of its log.
//
// A broken promise that has the signature of a known engine bug
// (ClassifyCharge) is reported under the bug's name. The report counts
// what was injected and what the engine did (retries by kind, new keys by
// reason, reconciliations), and compares the naive worker of the seed
// article (naive.go: a fresh key per delivery, the anti-pattern, only
// reachable from here) under the same faults.
//
// It imports the NATS client: it drives real servers and processes, and
// reads their streams whole to check them.
package chaos
