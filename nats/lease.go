package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Lease is a claim on one key of a KV bucket, taken, renewed and given up
// with compare-and-set writes, so that of the processes that contend for
// the key one holds it at a time. The projection runner, a rebuild's
// locks and the engines' turns at the sweep for lost timers all use it.
//
// A contender takes the key when it is absent, when its value is the
// contender's own claim, or when the claim there is stale. By default
// nobody compares clocks: a claim is stale once the contender has
// watched its revision stand still for a whole TTL on its own clock,
// while a holder trusts its claim only until TTL less a quarter after it
// began its last successful write, also on its own clock. As long as the
// two clocks run at about the same rate, a holder stops acting before
// anyone can take over. A contender that looks every poll takes a dead
// holder's key within TTL plus two polls of its last write.
//
// A lease given a shared clock (LeaseConfig.Now: the NATS server's, as
// every engine reads it) judges a claim by the time written in it
// instead: stale once that time is a TTL old by the contender's reading
// of the clock, or too far ahead of it (a clock far off). One look
// suffices, so a contender that looks now and then takes over at once.
type Lease struct {
	kv  jetstream.KeyValue
	key string
	cfg LeaseConfig

	mu    sync.Mutex
	rev   uint64    // revision of our value while held
	until time.Time // the claim is trusted before this (monotonic)
	since time.Time // when we took it

	seenRev uint64    // a contender's last sight of the key
	seenAt  time.Time // when it first saw that revision
}

// LeaseConfig configures a Lease.
type LeaseConfig struct {
	// Holder names the claimant in the key's value; What says what for.
	Holder string
	What   string
	// TTL is how long a claim lives without a write (see Lease).
	TTL time.Duration
	// Now, when set, is a clock every contender shares: each write is
	// stamped by it, and claims are judged by their stamps. Ahead is how
	// far ahead of it a stamp may be before it counts as none; default TTL.
	Now   func() time.Time
	Ahead time.Duration
	// Format is how a claim is written in the key; default LeaseJSON.
	Format LeaseFormat
}

// ErrLeaseLost says a holder's claim was taken over, or could not be
// renewed: it must stop acting on it.
var ErrLeaseLost = errors.New("nats: lease lost")

// NewLease returns a lease on key of kv, not held yet.
func NewLease(kv jetstream.KeyValue, key string, cfg LeaseConfig) *Lease {
	if cfg.Format.Encode == nil {
		cfg.Format = LeaseJSON
	}
	if cfg.Ahead <= 0 {
		cfg.Ahead = cfg.TTL
	}
	return &Lease{kv: kv, key: key, cfg: cfg}
}

// Key is the key l claims.
func (l *Lease) Key() string { return l.key }

// Holder is the name l claims it under.
func (l *Lease) Holder() string { return l.cfg.Holder }

// TTL is l's TTL.
func (l *Lease) TTL() time.Duration { return l.cfg.TTL }

// Held reports whether the claim is held and still trusted.
func (l *Lease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0 && time.Now().Before(l.until)
}

// Claimed reports whether l believes it has the key, trusted or not (a
// renewal may still save it).
func (l *Lease) Claimed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0
}

// RenewDue reports whether a third of the TTL passed since the last
// write, or the claim is no longer trusted.
func (l *Lease) RenewDue() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev != 0 && time.Until(l.until) < l.trust()-l.cfg.TTL/3
}

// trust is how long a write is trusted: the TTL less a quarter.
func (l *Lease) trust() time.Duration { return l.cfg.TTL - l.cfg.TTL/4 }

// Acquire takes the key unless l holds it and trusts its claim, and
// reports whether l holds it.
func (l *Lease) Acquire(ctx context.Context) (bool, error) {
	if l.Held() {
		return true, nil
	}
	ok, _, err := l.Take(ctx)
	return ok, err
}

// Take writes l's claim into the key when the key is absent, holds l's
// own claim, or holds a stale one, and reports whether it did. found is
// the claim it found there: the zero claim when there was none, or one it
// could not read. A key written by another between the read and the
// write is read again, up to three times; then Take leaves it to the
// others, who are taking it.
func (l *Lease) Take(ctx context.Context) (taken bool, found LeaseClaim, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.rev = 0
	for tries := 1; ; tries++ {
		start := time.Now()
		found = LeaseClaim{}
		var rev uint64
		e, err := l.kv.Get(ctx, l.key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			l.since = start
			rev, err = l.kv.Create(ctx, l.key, l.value()) // also over a delete marker
		case err != nil:
			return false, found, fmt.Errorf("nats: read the %s lease: %w", l.key, err)
		default:
			var readable bool
			found, readable = l.cfg.Format.Decode(e.Value())
			if !readable {
				found = LeaseClaim{}
			}
			mine := readable && found.Holder == l.cfg.Holder
			switch {
			case mine && !found.Since.IsZero():
				l.since = found.Since // written before l lost track of it
			case mine:
				l.since = start
			case !l.stale(e.Revision(), found, readable, start):
				return false, found, nil
			default:
				l.since = start
			}
			rev, err = l.kv.Update(ctx, l.key, l.value(), e.Revision())
		}
		switch {
		case err == nil:
			l.rev, l.until = rev, start.Add(l.trust())
			return true, found, nil
		case !IsCASConflict(err):
			return false, found, fmt.Errorf("nats: take the %s lease: %w", l.key, err)
		case tries == 3:
			return false, found, nil
		}
	}
}

// stale records a sight of the key at rev holding claim (readable or
// not) and reports whether it may be taken over at now.
func (l *Lease) stale(rev uint64, claim LeaseClaim, readable bool, now time.Time) bool {
	if l.cfg.Now != nil {
		if !readable {
			return true
		}
		ago := l.cfg.Now().Sub(claim.Stamp)
		return ago <= -l.cfg.Ahead || ago >= l.cfg.TTL
	}
	if rev != l.seenRev {
		l.seenRev, l.seenAt = rev, now
		return false
	}
	return now.Sub(l.seenAt) >= l.cfg.TTL
}

// value is l's claim as the key holds it, stamped now.
func (l *Lease) value() []byte {
	stamp := time.Now()
	if l.cfg.Now != nil {
		stamp = l.cfg.Now()
	}
	return l.cfg.Format.Encode(LeaseClaim{Holder: l.cfg.Holder, What: l.cfg.What, Since: l.since, Stamp: stamp, TTL: l.cfg.TTL})
}

// Renew writes a held claim again; on failure the claim is lost
// (ErrLeaseLost if another took the key).
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rev == 0 {
		return ErrLeaseLost
	}
	start := time.Now()
	rev, err := l.kv.Update(ctx, l.key, l.value(), l.rev)
	if err != nil {
		l.rev = 0
		if IsCASConflict(err) {
			return ErrLeaseLost
		}
		return fmt.Errorf("nats: renew the %s lease: %w", l.key, err)
	}
	l.rev, l.until = rev, start.Add(l.trust())
	return nil
}

// Release gives the key up at once, if l's claim is still the one there.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rev == 0 {
		return nil
	}
	err := l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.rev))
	l.rev, l.until = 0, time.Time{}
	if err != nil && !IsCASConflict(err) {
		return fmt.Errorf("nats: release the %s lease: %w", l.key, err)
	}
	return nil
}

// Live reports whether someone holds a live claim on the key: it is
// there, and not stale by l's rule (a rebuild's pause request, which the
// runners watch).
func (l *Lease) Live(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, err := l.kv.Get(ctx, l.key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	claim, readable := l.cfg.Format.Decode(e.Value())
	return !l.stale(e.Revision(), claim, readable, time.Now()), nil
}
