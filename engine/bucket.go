package engine

import (
	"context"
	"time"
)

// Bucket is a key-value bucket that every engine shares: serp_accounts
// for the limiter, serp_schedules for recurring schedules. Every value
// has a revision, and a write can be made conditional on it: that is how
// engines that write one key at once take turns. Revisions grow over the
// whole bucket: a later write to any key has a higher one. package nats
// has the JetStream implementation (nats.KV); package enginetest has a
// strict in-memory fake and the conformance suite both pass.
type Bucket interface {
	// Get returns a key's value and its revision. A key without a value
	// (never written, or deleted) is no error: its revision is 0.
	Get(ctx context.Context, key string) (value []byte, rev uint64, err error)
	// Write stores value under key if the key is still at revision rev
	// (0: if it has no value), and returns the new revision. ok is false,
	// with no error, when the key has moved on: read it again.
	Write(ctx context.Context, key string, value []byte, rev uint64) (newRev uint64, ok bool, err error)
	// Put stores value under key, whatever it held.
	Put(ctx context.Context, key string, value []byte) error
	// Delete removes a key's value if the key is still at revision rev.
	// ok is false, with no error, when the key has moved on or has no
	// value. Revision 0 removes whatever the key holds.
	Delete(ctx context.Context, key string, rev uint64) (ok bool, err error)
	// Keys lists the keys with a value that match filter: dot-separated
	// tokens, "*" for any one token, a last ">" for one or more.
	Keys(ctx context.Context, filter string) ([]string, error)
}

// WatchBucket is a Bucket whose changes can be watched: the limiter
// keeps its view of every account's limits, pauses and slots up to date
// that way.
type WatchBucket interface {
	Bucket
	// Watch calls apply with the value of every key that matches one of
	// filters, then calls caughtUp, then calls apply with each change as
	// it comes (deleted marks a deletion), all in the order of their
	// revisions. caughtUp is called once, also if the watch ends before
	// it caught up. stop ends the watch and returns once apply has
	// returned for the last time.
	Watch(ctx context.Context, filters []string, apply func(key string, value []byte, rev uint64, deleted bool), caughtUp func()) (stop func(), err error)
	// PurgeDeleted removes what the deletions made before cutoff, of keys
	// that match filter, leave in the bucket, and nothing written after
	// them.
	PurgeDeleted(ctx context.Context, filter string, cutoff time.Time) error
}
