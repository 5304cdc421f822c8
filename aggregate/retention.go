package aggregate

import (
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/events"
)

// DefaultSkewMargin is how far apart the clocks of two engines may be. The
// retention checks keep this much room on top of the horizon, so an engine
// whose clock runs late never orders a slot another engine let expire.
const DefaultSkewMargin = 24 * time.Hour

// Expires is when the job leaves the live log: the retention after its
// slot, or after its scheduling if that came later. Every message of the
// job and every view of it carry this one time, so the job leaves whole.
// It is zero for a job kept for ever (no retention) and for no job.
func (s State) Expires() time.Time {
	if !s.Exists() || s.Policy.Retention <= 0 {
		return time.Time{}
	}
	start := s.ScheduledAt
	if s.Slot.After(start) {
		start = s.Slot
	}
	return start.Add(s.Policy.Retention.D())
}

// MinRetention is the shortest retention that lets every job finish in the
// live log: its age budget, a re-purchase with a budget of its own, and
// three skew margins (one for intake, one for re-purchases, one spare).
func MinRetention(p events.RetryPolicy, margin time.Duration) time.Duration {
	return 2*p.MaxAge.D() + 3*margin
}

// ValidateRetention refuses a retention shorter than MinRetention. Zero
// keeps jobs for ever and is valid.
func ValidateRetention(retention time.Duration, p events.RetryPolicy, margin time.Duration) error {
	if retention == 0 {
		return nil
	}
	if min := MinRetention(p, margin); retention < min {
		return fmt.Errorf("retention %s is too short: a job may run %s (its max age) and again as long after a re-purchase, plus %s of margin for clock skew; use at least %s",
			retention, p.MaxAge.D(), 3*margin, min)
	}
	return nil
}

// SlotExpired reports whether intake must refuse a slot: it is older than
// the horizon less the skew margin, so its job may have left the live log
// already, on this engine's clock or on one up to margin ahead. A job made
// for it again could buy its observation a second time.
func SlotExpired(slot, now time.Time, retention, margin time.Duration) bool {
	if retention <= 0 {
		return false
	}
	return slot.Before(now.Add(-retention + margin))
}

// RepurchaseTooLate reports whether a re-purchase starting at now could
// outlive the job in the live log: its new age budget plus the skew margin
// ends after the job expires.
func (s State) RepurchaseTooLate(now time.Time, margin time.Duration) bool {
	exp := s.Expires()
	return !exp.IsZero() && now.Add(s.Policy.MaxAge.D()+margin).After(exp)
}
