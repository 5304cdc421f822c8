package accounts_test

import (
	"testing"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

func TestRateLimitsBurstThenRate(t *testing.T) {
	l := accounts.Limits{RatePerSec: 5, Burst: 3}
	var tat time.Time
	now := t0
	allowed := 0
	for i := 0; i < 3; i++ {
		var ok bool
		tat, _, ok = l.Rate(tat, now)
		require.True(t, ok, "the burst starts at once")
		allowed++
	}
	_, wait, ok := l.Rate(tat, now)
	require.False(t, ok)
	require.Equal(t, 200*time.Millisecond, wait, "then one every 1/rate")
	// Over 10 seconds, at most rate*10 + burst start.
	for now = t0; now.Before(t0.Add(10 * time.Second)); now = now.Add(10 * time.Millisecond) {
		if next, _, ok := l.Rate(tat, now); ok {
			tat = next
			allowed++
		}
	}
	require.LessOrEqual(t, allowed, 5*10+3)
	require.GreaterOrEqual(t, allowed, 5*10)
}

func TestBudget(t *testing.T) {
	l := accounts.Limits{DailyPages: 10, DailyMicros: 8000, PriceMicros: 1000}
	s := accounts.Spend{}.Add(7, l.Price())
	require.True(t, l.Fits(s, 1))
	require.False(t, l.Fits(s, 2), "money runs out first")
	require.True(t, accounts.Limits{}.Fits(s, 100), "no budget, no limit")
	require.Equal(t, accounts.Spend{}, s.Add(-9, 1000), "a refund never goes below zero")
	require.Equal(t, 1, accounts.PagesFor(10))
	require.Equal(t, 10, accounts.PagesFor(100))
	require.Equal(t, "2026-12-02", accounts.Day(t0.Add(9*time.Hour)))
}

func TestLimitsValidate(t *testing.T) {
	require.NoError(t, accounts.Limits{MaxInFlight: 4, RatePerSec: 2.5}.Validate())
	require.Error(t, accounts.Limits{MaxInFlight: -1}.Validate())
	require.Error(t, accounts.Limits{MaxInFlight: 5000}.Validate())
	require.True(t, accounts.Limits{}.Unlimited())
	// Beyond the bounds the limits' arithmetic would overflow, and a
	// limit hold nothing.
	for name, l := range map[string]accounts.Limits{
		"a rate slower than one a day": {RatePerSec: 1e-10},
		"a burst too large":            {RatePerSec: 1, Burst: accounts.MaxBurst + 1},
		"a price too high":             {DailyMicros: 1000, PriceMicros: 1e18},
	} {
		require.Error(t, l.Validate(), name)
	}
	slowest := accounts.Limits{RatePerSec: accounts.MinRatePerSec, Burst: accounts.MaxBurst, PriceMicros: accounts.MaxPriceMicros, DailyMicros: 1 << 62}
	require.NoError(t, slowest.Validate())
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	tat := now
	for range 3 {
		next, wait, ok := slowest.Rate(tat, now)
		require.True(t, ok, "within the burst")
		require.Zero(t, wait)
		require.True(t, next.After(tat), "the limiter's time moves on, not back")
		tat = next
	}
	require.True(t, slowest.Fits(accounts.Spend{}, 1000), "a day's spend at the highest price fits an int64")

}

// TestSpendDoesNotWrapRound: a reply that reports absurdly many pages at
// the highest price spends past any budget, not below zero.
func TestSpendDoesNotWrapRound(t *testing.T) {
	lim := accounts.Limits{DailyMicros: 5_000_000, PriceMicros: accounts.MaxPriceMicros}
	require.NoError(t, lim.Validate())
	spent := accounts.Spend{}.Add(10_000_000_000, lim.Price())
	require.Positive(t, spent.Micros)
	require.False(t, lim.Fits(spent, 1), "spent %+v: the day's budget is spent", spent)
	require.False(t, lim.Fits(spent.Add(1, lim.Price()), 1), "and stays spent")
}

// TestRaisedRateAppliesAtOnce: a burst at a slow rate leaves the limiter's
// time hours ahead; once the rate is raised, the wait is the new rate's.
func TestRaisedRateAppliesAtOnce(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	slow := accounts.Limits{RatePerSec: 0.01, Burst: 100}
	var tat time.Time
	for range 100 {
		next, _, ok := slow.Rate(tat, now)
		require.True(t, ok)
		tat = next
	}
	_, wait, ok := slow.Rate(tat, now)
	require.False(t, ok)
	require.Equal(t, 100*time.Second, wait, "the slow rate's next start")

	fast := accounts.Limits{RatePerSec: 10, Burst: 100}
	_, wait, ok = fast.Rate(tat, now)
	require.False(t, ok, "the burst is spent")
	require.LessOrEqual(t, wait, 100*time.Millisecond, "one interval of the new rate, not hours")
}
