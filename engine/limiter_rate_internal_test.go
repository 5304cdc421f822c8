package engine

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/stretchr/testify/require"
)

// TestRateLimitKeepsItsPace: at a rate of one search a second, a few jobs
// held back by the rate ask again when the engine says (throttledFor, from
// the limiter's wait) on a fake clock, each search that starts replaced by
// a new job. They start close to one a second, never faster. (Jobs used to
// wait twice the rate's wait and more, and started about 0.5 a second.)
func TestRateLimitKeepsItsPace(t *testing.T) {
	for _, waiting := range []int{1, 3, 20} {
		t.Run(fmt.Sprintf("%d waiting", waiting), func(t *testing.T) {
			clk := &budgetClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			lim := accounts.Limits{RatePerSec: 1}
			l := budgetLimiter(t, lim, clk)
			e := &Engine{cfg: Config{Limiter: l, StarveAfter: time.Minute, Now: clk.now}}
			ctx := context.Background()
			q := &jobAsks{}
			next := 0
			newJob := func(at time.Time) {
				next++
				heap.Push(q, jobAsk{job: fmt.Sprintf("job-%d", next), at: at})
			}
			for range waiting {
				newJob(clk.now())
			}
			const starts, counted = 80, 60
			var first, last time.Time
			for n := 0; n < starts; {
				ask := heap.Pop(q).(jobAsk)
				clk.add(ask.at.Sub(clk.now()))
				p, err := l.Acquire(ctx, Request{JobID: ask.job, Pages: 1})
				var te *ThrottledError
				if errors.As(err, &te) {
					d := e.throttledFor(aggregate.State{JobID: ask.job}, te)
					heap.Push(q, jobAsk{job: ask.job, at: clk.now().Add(d)})
					continue
				}
				require.NoError(t, err)
				p.Done(ctx, true, true, 1)
				if n++; n == starts-counted {
					first = clk.now()
				}
				last = clk.now()
				newJob(clk.now())
			}
			perSec := float64(counted) / last.Sub(first).Seconds()
			require.LessOrEqual(t, perSec, 1.0, "the limit is a ceiling")
			require.GreaterOrEqual(t, perSec, 0.85, "close to it: %.2f a second", perSec)
		})
	}
}

type jobAsk struct {
	job string
	at  time.Time
}

// jobAsks is a heap of jobs by when they ask.
type jobAsks []jobAsk

func (a jobAsks) Len() int           { return len(a) }
func (a jobAsks) Less(i, j int) bool { return a[i].at.Before(a[j].at) }
func (a jobAsks) Swap(i, j int)      { a[i], a[j] = a[j], a[i] }
func (a *jobAsks) Push(x any)        { *a = append(*a, x.(jobAsk)) }
func (a *jobAsks) Pop() any {
	old := *a
	x := old[len(old)-1]
	*a = old[:len(old)-1]
	return x
}
