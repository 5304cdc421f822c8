package engine

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
)

// IDs makes event ids (monotonic ULIDs) and attempt keys (random UUIDs). It
// is safe for concurrent use.
type IDs struct {
	now     func() time.Time
	mu      sync.Mutex
	entropy *ulid.MonotonicEntropy
}

// NewIDs returns an id source reading time from now.
func NewIDs(now func() time.Time) *IDs {
	return &IDs{now: now, entropy: ulid.Monotonic(rand.Reader, 0)}
}

// EventID returns a new ULID.
func (g *IDs) EventID() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return ulid.MustNew(ulid.Timestamp(g.now()), g.entropy).String()
}

// AttemptKey returns a new random UUID for an Idempotency-Key.
func (g *IDs) AttemptKey() string { return uuid.NewString() }
