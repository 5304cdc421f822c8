package engine

import (
	"context"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper"
)

// Store is the event log as the engine uses it. package nats has the
// JetStream implementation and eventstore/memstore a strict in-memory fake.
type Store interface {
	// Append writes evs atomically if the job is still at version
	// expected, or fails with eventstore.ErrConcurrency.
	Append(ctx context.Context, jobID string, expected uint64, evs ...events.Event) (uint64, error)
	// Load returns a job's events and its version.
	Load(ctx context.Context, jobID string) ([]events.Event, uint64, error)
}

// API is the search provider: serper.Client, or a test double. An API that
// also has Timeout() time.Duration (serper.Client does), the longest it
// waits for one search, has its claimed requests sent only while their
// search would end within the claim's lease.
type API interface {
	Search(ctx context.Context, key string, body []byte) serper.Result
	Ledger(ctx context.Context, q serper.LedgerQuery) ([]serper.LedgerEntry, error)
}

// Timers wakes a job at a time. Arming again replaces the earlier time.
type Timers interface {
	Arm(ctx context.Context, jobID string, at time.Time) error
}
