package sim

import (
	"math/rand/v2"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"
)

// seededIDs makes event ids and attempt keys from a seeded source, so a
// simulation replays exactly. Each task has its own: two tasks woken at the
// same fake instant may run in either order, and must not swap ids.
type seededIDs struct {
	rng *rand.Rand
	now func() time.Time
}

func newIDs(seed, stream uint64, now func() time.Time) *seededIDs {
	return &seededIDs{rng: rand.New(rand.NewPCG(seed, stream)), now: now}
}

// EventID returns a ULID: the (fake) time and 80 seeded random bits.
func (g *seededIDs) EventID() string {
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(g.now()))
	var ent [10]byte
	g.fill(ent[:])
	_ = id.SetEntropy(ent[:])
	return id.String()
}

// AttemptKey returns a version 4 UUID from seeded bits.
func (g *seededIDs) AttemptKey() string {
	var b [16]byte
	g.fill(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return uuid.UUID(b).String()
}

func (g *seededIDs) fill(b []byte) {
	for i := 0; i < len(b); i += 8 {
		v := g.rng.Uint64()
		for j := i; j < len(b) && j < i+8; j++ {
			b[j] = byte(v)
			v >>= 8
		}
	}
}
