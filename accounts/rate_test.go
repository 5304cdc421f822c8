package accounts_test

import (
	"container/heap"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/stretchr/testify/require"
)

// TestRetryKeepsTheRate: jobs held back by a rate ask again as Retry says,
// on a fake clock, with a steady backlog (each search that starts is
// replaced by a new job). The searches start close to the rate, never
// above it, and the asks a start costs stay bounded however many wait.
// (Retry used to wait twice the limit's wait and more: at 1/s a backlog of
// one or two jobs started about 0.5/s.)
func TestRetryKeepsTheRate(t *testing.T) {
	for _, rate := range []float64{1, 20} {
		for _, waiting := range []int{1, 2, 10, 100, 1000} {
			lim := accounts.Limits{RatePerSec: rate}
			got, asks := runBacklog(lim, waiting, 400)
			require.LessOrEqual(t, got, rate, "rate %g, %d waiting", rate, waiting)
			require.GreaterOrEqual(t, got, 0.85*rate, "rate %g, %d waiting: %.2f a second", rate, waiting, got)
			require.LessOrEqual(t, asks, 20.0, "rate %g, %d waiting: asks a start", rate, waiting)
		}
	}
}

// runBacklog runs waiting jobs against lim's rate until starts searches
// started, and returns the rate of the last three quarters of them and how
// often a job asked for each.
func runBacklog(lim accounts.Limits, waiting, starts int) (perSec, asksPerStart float64) {
	t0 := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	r := rand.New(rand.NewPCG(1, 2))
	q := &asks{}
	for range waiting {
		heap.Push(q, t0)
	}
	var tat, from, last time.Time
	n, asked := 0, 0
	for n < starts {
		at := heap.Pop(q).(time.Time)
		asked++
		next, wait, ok := lim.Rate(tat, at)
		if !ok {
			heap.Push(q, at.Add(accounts.Retry(false, 0, time.Hour, wait, lim.RateSpread(waiting), r.Float64())))
			continue
		}
		tat, last = next, at
		if n++; n == starts/4 {
			from, asked = at, 0
		}
		heap.Push(q, at) // the next job of the backlog asks at once
	}
	counted := starts - starts/4
	return float64(counted) / last.Sub(from).Seconds(), float64(asked) / float64(counted)
}

// asks is a heap of the times jobs ask.
type asks []time.Time

func (a asks) Len() int           { return len(a) }
func (a asks) Less(i, j int) bool { return a[i].Before(a[j]) }
func (a asks) Swap(i, j int)      { a[i], a[j] = a[j], a[i] }
func (a *asks) Push(x any)        { *a = append(*a, x.(time.Time)) }
func (a *asks) Pop() any {
	old := *a
	x := old[len(old)-1]
	*a = old[:len(old)-1]
	return x
}

func TestRetryFavoursHighPriorityWithoutStarving(t *testing.T) {
	high := accounts.Retry(true, 0, time.Minute, 100*time.Millisecond, 0, 0.5)
	normal := accounts.Retry(false, 0, time.Minute, 100*time.Millisecond, 0, 0)
	require.Less(t, high, normal, "the latest high job asks before the earliest normal one")
	starved := accounts.Retry(false, 2*time.Minute, time.Minute, 100*time.Millisecond, 0, 0.5)
	require.Equal(t, high, starved, "a normal job kept waiting is served like a high one")
	require.Equal(t, accounts.Retry(false, 0, time.Minute, 100*time.Millisecond, 0, 1), accounts.RetryBound(100*time.Millisecond, 0))
	require.GreaterOrEqual(t, accounts.Retry(true, 0, time.Minute, 2*time.Second, 0, 0), 2*time.Second, "never before the limit frees")
}
