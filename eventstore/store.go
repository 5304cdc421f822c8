// Package eventstore is the event store port: the errors callers act on,
// how an append becomes the messages a store writes (EncodeAppend, Pack,
// CheckSize), how a group commit is planned into atomic batches
// (PlanBatches) and how a re-read tells whether an append landed (Match).
// The bytes of those messages, bodies and headers, are package events'.
// The JetStream store lives in package nats, the strict in-memory fake in
// eventstore/memstore, and the conformance suite both must pass in
// eventstore/storetest.
//
// A job's version, as a store sees it, is an opaque position: the sequence
// of the job's last event in the log, 0 when the job has no events. Append
// takes the version the caller last saw and refuses with ErrConcurrency if
// the job moved on since, which is how two deliveries of one job are kept
// from both claiming it or both rotating its key.
package eventstore

import (
	"errors"
	"fmt"
)

// ErrConcurrency means the job has events the caller did not see: another
// writer got there first. Reload the job, decide again.
var ErrConcurrency = errors.New("eventstore: the job changed since it was loaded")

// ErrTooLarge means an event does not fit in one message of the log.
var ErrTooLarge = errors.New("eventstore: event is larger than the log accepts")

// ErrDuplicate means an event id of the append is already in the log (in
// any job) somewhere other than right after the expected version, or
// appears twice in the append. Event ids are new ULIDs for every decision,
// so this is a bug in the caller: retrying the same append cannot help.
// The log remembers ids for its duplicate window (two minutes on
// JetStream); an id older than that is not recognised.
var ErrDuplicate = errors.New("eventstore: event id is already in the log")

// ErrInvalid means the append itself is wrong (an event of another job, a
// malformed envelope, versions that do not follow on). Nothing was written.
var ErrInvalid = errors.New("eventstore: invalid append")

// ErrUnknownOutcome means the store could not find out whether an append
// was written (the server did not answer, or did not answer in time). The
// append is idempotent: repeat it with the same events and the same
// expected version, or reload the job and decide again.
var ErrUnknownOutcome = errors.New("eventstore: outcome of the append is unknown")

// CorruptError names an event in the log that cannot be read. It is never
// fixed by retrying; an operator has to look.
type CorruptError struct {
	JobID string
	Seq   uint64
	Err   error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("eventstore: event at sequence %d of job %s is unreadable: %v", e.Seq, e.JobID, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }
