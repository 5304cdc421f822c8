package aggregate

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/serpent-engine/serpent/events"
)

// DefaultPolicy is the retry policy for the real Serper.live API: a 15
// minute replay window with 2 minutes kept free at its end, a lease that
// covers the 100 s client timeout, five keys and a day per job.
func DefaultPolicy() events.RetryPolicy {
	return events.RetryPolicy{
		BaseDelay:     events.Duration(time.Second),
		MaxDelay:      events.Duration(time.Minute),
		MinDelay:      events.Duration(100 * time.Millisecond),
		RetryAfterMax: events.Duration(5 * time.Minute),
		ReplayWindow:  events.Duration(15 * time.Minute),
		SafetyMargin:  events.Duration(2 * time.Minute),
		Lease:         events.Duration(2 * time.Minute),
		MaxKeys:       5,
		MaxAge:        events.Duration(24 * time.Hour),
	}
}

// ValidatePolicy reports every setting that cannot work.
func ValidatePolicy(p events.RetryPolicy) error {
	var errs []error
	pos := func(name string, d events.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("retry policy: %s must be positive", name))
		}
	}
	pos("base_delay", p.BaseDelay)
	pos("max_delay", p.MaxDelay)
	pos("replay_window", p.ReplayWindow)
	pos("lease", p.Lease)
	pos("max_age", p.MaxAge)
	if p.MinDelay < 0 || p.SafetyMargin < 0 || p.RetryAfterMax < 0 {
		errs = append(errs, errors.New("retry policy: min_delay, safety_margin and retry_after_max cannot be negative"))
	}
	if p.MaxDelay < p.BaseDelay || p.MaxDelay < p.MinDelay {
		errs = append(errs, errors.New("retry policy: max_delay must be at least base_delay and min_delay"))
	}
	if p.SafetyMargin >= p.ReplayWindow {
		errs = append(errs, errors.New("retry policy: safety_margin must be shorter than replay_window, or no key could ever be resent"))
	}
	if p.MaxKeys < 1 {
		errs = append(errs, errors.New("retry policy: max_keys must be at least 1"))
	}
	return errors.Join(errs...)
}

// KeyDeadline is the last moment a key may be sent: its first send plus the
// replay window, less the safety margin. Past it a resend could silently
// become a new purchase.
func KeyDeadline(p events.RetryPolicy, firstSend time.Time) time.Time {
	return firstSend.Add(p.ReplayWindow.D() - p.SafetyMargin.D())
}

// AgeDeadline is the last moment a job may start a new purchase attempt:
// its age budget after start (State.AgeStart).
func AgeDeadline(p events.RetryPolicy, start time.Time) time.Time {
	return start.Add(p.MaxAge.D())
}

// AgeStart is when the job's age budget starts: when it was scheduled, or
// its slot if that is later, or its last authorised re-purchase. Waiting
// for its slot is not trying: a job ordered a week ahead has its whole
// budget at its slot. A re-purchase, like its key budget, gets a budget of
// its own.
func (s State) AgeStart() time.Time {
	start := s.ScheduledAt
	if s.Slot.After(start) {
		start = s.Slot
	}
	for _, a := range s.Attempts {
		if a.Reason == ReasonRepurchase && a.CreatedAt.After(start) {
			start = a.CreatedAt
		}
	}
	return start
}

// Backoff is the delay before the next send after n retries: exponential
// with full jitter between MinDelay and min(MaxDelay, BaseDelay*2^n), and at
// least the Retry-After the API asked for, capped at RetryAfterMax. jitter is
// in [0, 1).
func Backoff(p events.RetryPolicy, n int, jitter float64, retryAfter time.Duration) time.Duration {
	ceiling := p.MaxDelay.D()
	if n < 62 {
		if d := p.BaseDelay.D() << n; d > 0 && d < ceiling {
			ceiling = d
		}
	}
	lo := p.MinDelay.D()
	d := lo
	if ceiling > lo {
		d = lo + time.Duration(jitter*float64(ceiling-lo))
	}
	if retryAfter > 0 {
		ra := min(retryAfter, p.RetryAfterMax.D())
		d = max(d, ra)
	}
	return d
}

// Jitter is the deterministic jitter of a job's nth send, in [0, 1). A hash
// keeps Decide pure and replayable while spreading jobs apart.
func Jitter(jobID string, n int) float64 {
	h := fnv.New64a()
	h.Write([]byte(jobID))
	h.Write([]byte{0})
	h.Write([]byte(strconv.Itoa(n)))
	// FNV alone keeps neighbouring inputs close; a splitmix64 finaliser
	// spreads them over the whole range.
	z := h.Sum64()
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	z ^= z >> 31
	return float64(z>>11) / float64(1<<53)
}
