package memstore

import (
	"context"
	"sync"
	"time"

	"github.com/serpent-engine/serpent/eventstore"
)

// Defaults, the same as a NATS server's and the SERP_EVENTS stream's.
const (
	DefaultMaxMsgSize      = 1 << 20
	DefaultMaxBatch        = 1000
	DefaultDuplicateWindow = 2 * time.Minute
)

// Options configure a Store. The zero value is a store with JetStream's
// defaults.
type Options struct {
	// MaxMsgSize is the largest message (headers included) the store
	// accepts; 0 means DefaultMaxMsgSize.
	MaxMsgSize int
	// MaxBatch is the most messages in one atomic batch; 0 means
	// DefaultMaxBatch.
	MaxBatch int
	// DuplicateWindow is how long event ids are remembered; 0 means
	// DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	// Now is the clock of the duplicate window and of message TTLs; nil
	// means time.Now.
	Now func() time.Time
	// Hooks inject faults.
	Hooks Hooks
}

// Hooks inject faults for deterministic simulations. They are called
// without the store's lock held and may block.
type Hooks struct {
	// BeforeAppend is called before an append is checked. An error fails
	// the append as is (returned to the caller unchanged) with nothing
	// written.
	BeforeAppend func(jobID string) error
	// AfterAppend is called after an append was written. An error is
	// returned to the caller as is instead of the version: the write
	// landed, the reply was lost. Return an error wrapping
	// eventstore.ErrUnknownOutcome to model the JetStream store exactly.
	AfterAppend func(jobID string) error
}

// Store is the in-memory event store. It is safe for concurrent use.
type Store struct {
	opts Options

	mu      sync.Mutex
	seq     uint64              // last sequence used, over all jobs
	commits uint64              // appends committed, to forget old ids now and then
	jobs    map[string][]stored // a job's messages in order
	// archived are the messages that left jobs by their TTL, as
	// SERP_ARCHIVE keeps them (History).
	archived map[string][]stored
	ids      map[string]idEntry // event id -> where and when it was written
}

type stored struct {
	seq     uint64
	msg     eventstore.Message
	expires time.Time // when the server would drop it (its TTL); zero: never
}

type idEntry struct {
	seq uint64
	at  time.Time
}

// New returns an empty store.
func New(opts Options) *Store {
	if opts.MaxMsgSize <= 0 {
		opts.MaxMsgSize = DefaultMaxMsgSize
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.DuplicateWindow <= 0 {
		opts.DuplicateWindow = DefaultDuplicateWindow
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{opts: opts, jobs: make(map[string][]stored), archived: make(map[string][]stored), ids: make(map[string]idEntry)}
}

// MaxMessageSize is the largest message the store accepts, headers
// included.
func (s *Store) MaxMessageSize() int { return s.opts.MaxMsgSize }

// WriteRaw puts data on a job's subject as a damaged log would hold it,
// bypassing every check, and returns its sequence. It is for tests of
// corruption handling.
func (s *Store) WriteRaw(_ context.Context, jobID string, data []byte) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.jobs[jobID] = append(s.jobs[jobID], stored{seq: s.seq, msg: eventstore.Message{Data: append([]byte(nil), data...)}})
	return s.seq, nil
}

// LastSequence is the sequence of the last message in the store, over all
// jobs.
func (s *Store) LastSequence() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}
