package accounts

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Limits is what an operator allows one API account. Zero means no limit.
// Field names are part of the format of the serp_accounts bucket.
type Limits struct {
	// MaxInFlight caps the searches in flight at once, over every worker.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// RatePerSec and Burst limit how fast searches start: RatePerSec on
	// average, up to Burst at once.
	RatePerSec float64 `json:"rate_per_sec,omitempty"`
	Burst      int     `json:"burst,omitempty"`
	// DailyPages and DailyMicros bound what a UTC day may buy, in billed
	// pages and in money (micro-dollars at PriceMicros a page).
	DailyPages  int   `json:"daily_pages,omitempty"`
	DailyMicros int64 `json:"daily_micros,omitempty"`
	PriceMicros int64 `json:"price_micros,omitempty"`
}

// DefaultPriceMicros is the price of a page when none is set.
const DefaultPriceMicros = 1000

// Validate reports every impossible setting.
func (l Limits) Validate() error {
	var errs []error
	if l.MaxInFlight < 0 || l.Burst < 0 || l.DailyPages < 0 || l.DailyMicros < 0 || l.PriceMicros < 0 {
		errs = append(errs, errors.New("limits cannot be negative"))
	}
	if l.RatePerSec < 0 || math.IsNaN(l.RatePerSec) || math.IsInf(l.RatePerSec, 0) {
		errs = append(errs, errors.New("rate_per_sec must be a positive number (or 0 for none)"))
	}
	if l.RatePerSec > 0 && l.RatePerSec < MinRatePerSec {
		errs = append(errs, fmt.Errorf("rate_per_sec is 0 (no limit) or at least %g, one search a day", MinRatePerSec))
	}
	if l.MaxInFlight > MaxSlots {
		errs = append(errs, fmt.Errorf("max_in_flight is at most %d", MaxSlots))
	}
	if l.Burst > MaxBurst {
		errs = append(errs, fmt.Errorf("burst is at most %d", MaxBurst))
	}
	if l.PriceMicros > MaxPriceMicros {
		errs = append(errs, fmt.Errorf("price_micros is at most %d, a thousand dollars a page", MaxPriceMicros))
	}
	return errors.Join(errs...)
}

// Bounds of the limits. Beyond them the arithmetic of a day's spend or
// of the rate's intervals would overflow, and a limit would hold nothing.
const (
	// MaxSlots bounds max_in_flight: each search in flight holds one slot.
	MaxSlots = 1024
	// MinRatePerSec is the slowest rate but none: one search a day.
	MinRatePerSec = 1.0 / 86400
	// MaxBurst bounds burst: a day's searches at the slowest rate.
	MaxBurst = 100_000
	// MaxPriceMicros bounds price_micros: a thousand dollars a page.
	MaxPriceMicros = 1_000_000_000
)

// Unlimited reports whether the account has no limit at all.
func (l Limits) Unlimited() bool {
	return l.MaxInFlight == 0 && l.RatePerSec == 0 && l.DailyPages == 0 && l.DailyMicros == 0
}

// Budgeted reports whether the account has a daily budget, in pages or
// in money.
func (l Limits) Budgeted() bool { return l.DailyPages > 0 || l.DailyMicros > 0 }

// Price is the price of a page.
func (l Limits) Price() int64 {
	if l.PriceMicros > 0 {
		return l.PriceMicros
	}
	return DefaultPriceMicros
}

// Spend is what an account bought, or has in flight, on one day.
type Spend struct {
	Pages  int   `json:"pages"`
	Micros int64 `json:"micros"`
}

// Add returns the spend with pages more (or fewer, if negative).
func (s Spend) Add(pages int, price int64) Spend {
	s.Pages += pages
	switch d := int64(pages); {
	case d > 0 && price > 0 && d > (math.MaxInt64-s.Micros)/price:
		s.Micros = math.MaxInt64 // beyond any budget, not wrapped round below zero
	default:
		s.Micros += d * price
	}
	if s.Pages < 0 {
		s.Pages, s.Micros = 0, 0
	}
	return s
}

// Fits reports whether buying pages more keeps the day within budget.
func (l Limits) Fits(s Spend, pages int) bool {
	after := s.Add(pages, l.Price())
	if l.DailyPages > 0 && after.Pages > l.DailyPages {
		return false
	}
	if l.DailyMicros > 0 && after.Micros > l.DailyMicros {
		return false
	}
	return true
}

// Day names the UTC day of t, as budgets count them.
func Day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// PagesFor estimates the pages a search with limit results may bill: ten
// results a page.
func PagesFor(limit int) int { return max(1, (limit+9)/10) }

// Rate is a GCRA limiter's decision: a search may start at now if the
// theoretical arrival time tat is at most Burst intervals ahead. It returns
// the new tat when allowed, or how long to wait.
func (l Limits) Rate(tat, now time.Time) (next time.Time, wait time.Duration, ok bool) {
	if l.RatePerSec <= 0 {
		return tat, 0, true
	}
	interval := time.Duration(float64(time.Second) / l.RatePerSec)
	burst := max(l.Burst, 1)
	if tat.Before(now) {
		tat = now
	}
	if most := now.Add(time.Duration(burst) * interval); tat.After(most) {
		// Left by a slower rate: a raised limit applies at once.
		tat = most
	}
	allowAt := tat.Add(-time.Duration(burst-1) * interval)
	if allowAt.After(now) {
		return tat, allowAt.Sub(now), false
	}
	return tat.Add(interval), 0, true
}
