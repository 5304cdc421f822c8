// Package aggregate is the pure core of serpent: the state of one job, how
// events change it, and what the job does next.
//
// A job's history is a list of events (package events). Fold reads them into
// a State; Apply adds one event and never fails, because an event is a fact
// that already happened. Decide is where rules live: given the state, one
// Input (the job was scheduled, a worker found it due, the API answered, the
// billing ledger answered, an operator acted) and the time, it returns the
// events to append, or an error saying why nothing may happen now.
//
// Nothing here reads the clock, draws random numbers or makes ids: the caller
// passes now and an IDs source, and backoff jitter is a hash of the job id and
// its send count. Replaying a log therefore gives the same decisions, and the
// retry schedule is a pure function of (state, now).
//
// The outcome table of the Serper.live retry contract is data (Table): the
// default reproduces the contract; a deployment can add or change rows, but
// never one that would mint a new key while an outcome is unknown.
//
// Verify checks a job's history against serpent's promises (keys persisted
// before use, one body, no resend past a key's deadline, a new key only after
// a definite outcome, at most one purchase unless authorised). The property
// tests and the audit both use it.
package aggregate
