// Package storetest is the conformance suite every serpent event store
// passes: the JetStream store in package nats and the in-memory fake in
// eventstore/memstore run the same tests, so the fake is exactly as strict as
// production.
//
// The rules it pins down, beyond the Store interface's comments:
//
//   - A version is the log sequence of the job's last event: increasing per
//     job, not consecutive (other jobs share the sequence), 0 for none.
//   - An append whose expected version is not the job's version fails with
//     eventstore.ErrConcurrency and writes nothing, unless the events right
//     after the expected version are exactly the appended ones (same ids,
//     same order): then the append already happened (a retry after a lost
//     reply) and it returns the version it produced, writing nothing new.
//   - An append at the right version with an event id the log already has
//     elsewhere (this job or another, within the duplicate window), or with
//     one id twice, fails with eventstore.ErrDuplicate and writes nothing. A
//     stale version wins over a duplicate id: that is ErrConcurrency.
//   - Several events are written all or none, at consecutive sequences.
//   - A message larger than the limit (headers included, see
//     eventstore.CheckSize) fails with eventstore.ErrTooLarge naming job, type, size
//     and limit; one exactly at the limit is written.
//   - An invalid append (another job's event, a bad envelope, versions not
//     following on, no events) fails with eventstore.ErrInvalid.
//   - Appends under eventstore.WithExpiry leave the log at that time, the
//     job whole: a load finds all its events or none (eventstore.SetTTL,
//     eventstore.Gone).
//   - An unreadable stored event makes Load fail with *eventstore.CorruptError
//     naming the job and the sequence.
package storetest

import (
	"context"
	"testing"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// Store is the event store as the engine uses it.
type Store interface {
	// Append writes evs (all for jobID, versions following on) atomically if the job's
	// current version is expected (0 = no events yet). Returns the new version.
	Append(ctx context.Context, jobID string, expected uint64, evs ...events.Event) (uint64, error)
	// Load returns the job's events in order and its version (0, nil slice if none).
	Load(ctx context.Context, jobID string) ([]events.Event, uint64, error)
	// AppendMany is group commit: many jobs' appends in as few atomic batches as possible;
	// one result per append, in order. A conflict on one job must not fail the others
	// (fall back to per-job appends for the batch that failed).
	AppendMany(ctx context.Context, appends []eventstore.Append) []eventstore.Result
}

// Sized is what the size tests need: the largest message the store takes,
// headers included.
type Sized interface {
	MaxMessageSize() int
}

// RawWriter is what the corruption tests need: a way to put arbitrary
// bytes on a job's subject, as a damaged log would hold them. It returns
// the sequence written.
type RawWriter interface {
	WriteRaw(ctx context.Context, jobID string, data []byte) (uint64, error)
}

// Run runs the whole suite. newStore returns an empty store (or one whose
// other contents do not matter: every test uses fresh job ids); the store
// must also implement Sized and RawWriter.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store)
	}{
		{"AppendAndLoad", testAppendAndLoad},
		{"EmptyJob", testEmptyJob},
		{"WrongExpectedVersion", testWrongExpectedVersion},
		{"Race", testRace},
		{"RetryIsIdempotent", testRetryIsIdempotent},
		{"DuplicateID", testDuplicateID},
		{"Atomic", testAtomic},
		{"Invalid", testInvalid},
		{"SizeLimit", testSizeLimit},
		{"GroupLimit", testGroupLimit},
		{"ManyJobs", testManyJobs},
		{"GroupCommit", testGroupCommit},
		{"GroupCommitConflicts", testGroupCommitConflicts},
		{"GroupCommitSingles", testGroupCommitSingles},
		{"GroupCommitLarge", testGroupCommitLarge},
		{"Corrupt", testCorrupt},
		{"Canceled", testCanceled},
		{"Expiry", testExpiry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newStore(t))
		})
	}
}
