package projector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
)

// lease is a claim on one key of the control bucket, kept alive by
// compare-and-set renewals. Nobody compares clocks: a contender takes the
// key over only after watching its revision stand still for a whole TTL on
// its own clock, and a holder trusts its claim only until TTL minus a
// margin after it began its last successful renewal, also on its own
// clock. As long as the two clocks run at about the same rate, a holder
// stops acting before anyone can take over. Values written under a lease
// carry compare-and-set checks of their own, so even a holder that stalls
// past that point cannot corrupt them (see Runner).
type lease struct {
	mu     sync.Mutex
	kv     jetstream.KeyValue
	key    string
	holder string
	what   string
	ttl    time.Duration

	rev   uint64    // revision of our value while held
	until time.Time // the claim is trusted before this (monotonic)
	since time.Time // when we took it

	seenRev uint64    // a contender's last sight of the key
	seenAt  time.Time // when it first saw that revision
}

// leaseValue is what the key holds: who, for what, since when, and the
// holder's TTL (ReadLag judges a pause by it).
type leaseValue struct {
	Holder  string          `json:"holder"`
	What    string          `json:"what"`
	Since   time.Time       `json:"since"`
	Renewed time.Time       `json:"renewed"`
	TTL     events.Duration `json:"ttl,omitempty"`
}

func newLease(kv jetstream.KeyValue, key, holder, what string, ttl time.Duration) *lease {
	return &lease{kv: kv, key: key, holder: holder, what: what, ttl: ttl}
}

// held reports whether the claim is held and still trusted.
func (l *lease) held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0 && time.Now().Before(l.until)
}

// claimed reports whether this holder believes it has the key, trusted
// or not (a renewal may still save it).
func (l *lease) claimed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0
}

// renewDue reports whether a third of the TTL passed since the last
// renewal, or the claim is no longer trusted.
func (l *lease) renewDue() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0 && time.Until(l.until) < l.trust()-l.ttl/3
}

func (l *lease) value() []byte {
	b, _ := json.Marshal(leaseValue{Holder: l.holder, What: l.what, Since: l.since.UTC(), Renewed: time.Now().UTC(),
		TTL: events.Duration(l.ttl)})
	return b
}

// acquire tries once to take the key: when it is absent, or when its
// revision has not moved for a TTL. It reports whether the lease is held.
func (l *lease) acquire(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rev != 0 && time.Now().Before(l.until) {
		return true, nil
	}
	l.rev = 0
	start := time.Now()
	l.since = start
	var newRev uint64
	e, err := l.kv.Get(ctx, l.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		newRev, err = l.kv.Create(ctx, l.key, l.value()) // also over a delete marker
	case err != nil:
		return false, fmt.Errorf("projector: read %s lease: %w", l.key, err)
	case !l.stalled(e.Revision(), start):
		return false, nil
	default:
		newRev, err = l.kv.Update(ctx, l.key, l.value(), e.Revision())
	}
	if snats.IsCASConflict(err) {
		return false, nil // someone else got there first
	}
	if err != nil {
		return false, fmt.Errorf("projector: take %s lease: %w", l.key, err)
	}
	l.rev, l.until = newRev, start.Add(l.trust())
	return true, nil
}

// stalled records a sight of the key at rev and reports whether it has
// not changed for a whole TTL.
func (l *lease) stalled(rev uint64, now time.Time) bool {
	if rev != l.seenRev {
		l.seenRev, l.seenAt = rev, now
		return false
	}
	return now.Sub(l.seenAt) >= l.ttl
}

// trust is how long a renewal is trusted: the TTL less a quarter.
func (l *lease) trust() time.Duration { return l.ttl - l.ttl/4 }

// renew extends a held lease; on failure the lease is lost.
func (l *lease) renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rev == 0 {
		return errLeaseLost
	}
	start := time.Now()
	rev, err := l.kv.Update(ctx, l.key, l.value(), l.rev)
	if err != nil {
		l.rev = 0
		if snats.IsCASConflict(err) {
			return errLeaseLost
		}
		return fmt.Errorf("projector: renew %s lease: %w", l.key, err)
	}
	l.rev, l.until = rev, start.Add(l.trust())
	return nil
}

// release gives the lease up at once, if it is still ours.
func (l *lease) release(ctx context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rev == 0 {
		return
	}
	_ = l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev))
	l.rev, l.until = 0, time.Time{}
}

var errLeaseLost = errors.New("projector: lease lost")

// live reports whether a key someone else renews (a rebuild's pause
// request) is alive: present, and its revision moved within a TTL.
func (l *lease) live(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, err := l.kv.Get(ctx, l.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return !l.stalled(e.Revision(), time.Now()), nil
}
