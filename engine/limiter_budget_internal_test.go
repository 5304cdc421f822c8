package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/engine/enginetest"
	"github.com/serpent-engine/serpent/nats/natstest"
)

type budgetClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *budgetClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *budgetClock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// budgetLimiter is a limiter on a fresh bucket with the default account's
// limits set, on a clock the test moves.
func budgetLimiter(t *testing.T, lim accounts.Limits, clk *budgetClock) *Limiter {
	t.Helper()
	kv := enginetest.NewBucket()
	require.NoError(t, SetLimits(context.Background(), kv, "", lim))
	return limiterOn(t, kv, "w", lim, clk)
}

// limiterOn is a limiter named name on kv, once it sees lim.
func limiterOn(t *testing.T, kv WatchBucket, name string, lim accounts.Limits, clk *budgetClock) *Limiter {
	t.Helper()
	l, err := NewLimiter(context.Background(), kv, name, 2*time.Minute, clk.now, nil)
	require.NoError(t, err)
	t.Cleanup(l.Close)
	natstest.WaitFor(t, 10*time.Second, func() error {
		if l.Limits("") != lim {
			return fmt.Errorf("limits not seen yet")
		}
		return nil
	})
	return l
}

func spentOn(t *testing.T, l *Limiter, day string) int {
	t.Helper()
	v, rev, err := l.kv.Get(context.Background(), "spend.default."+day)
	require.NoError(t, err)
	if rev == 0 {
		return 0
	}
	var s accounts.Spend
	require.NoError(t, json.Unmarshal(v, &s))
	return s.Pages
}

// TestRefundLandsOnTheReservationsDay: a key sent just before midnight
// whose outcome stays unknown is reconciled in the next day; finding no
// charge gives its page back to the day it was reserved on, not to the
// next day, whose budget it would otherwise stretch.
func TestRefundLandsOnTheReservationsDay(t *testing.T) {
	clk := &budgetClock{t: time.Date(2026, 3, 1, 23, 58, 0, 0, time.UTC)}
	l := budgetLimiter(t, accounts.Limits{DailyPages: 1}, clk)
	ctx := context.Background()
	p, err := l.Acquire(ctx, Request{JobID: "a", Pages: 1})
	require.NoError(t, err)
	sentAt := clk.now()
	p.Done(ctx, false, false, 0) // unknown: the page stays reserved
	clk.add(10 * time.Minute)    // the next day
	p, err = l.Acquire(ctx, Request{JobID: "b", Pages: 1})
	require.NoError(t, err)
	p.Done(ctx, true, true, 1) // the new day's page
	clk.add(5 * time.Minute)
	l.Refund(ctx, "", 1, sentAt) // a's key reconciled: not charged
	require.Equal(t, 0, spentOn(t, l, "2026-03-01"))
	require.Equal(t, 1, spentOn(t, l, "2026-03-02"))
	_, err = l.Acquire(ctx, Request{JobID: "c", Pages: 1})
	var te *ThrottledError
	require.ErrorAs(t, err, &te, "the new day's budget is spent")
	require.Equal(t, WaitBudget, te.Reason)
}

// TestSpentBudgetTakesNoRateToken: a search the day's budget holds back
// takes neither a rate token nor a slot, so a resend (which cannot buy)
// still gets the rate it needs to make its key's deadline; it asks again
// after ten seconds, or when the day ends.
func TestSpentBudgetTakesNoRateToken(t *testing.T) {
	clk := &budgetClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := budgetLimiter(t, accounts.Limits{RatePerSec: 1, Burst: 1, DailyPages: 1, MaxInFlight: 1}, clk)
	ctx := context.Background()
	p, err := l.Acquire(ctx, Request{JobID: "a", Pages: 1})
	require.NoError(t, err)
	p.Done(ctx, true, true, 1)
	clk.add(1100 * time.Millisecond)
	_, err = l.Acquire(ctx, Request{JobID: "b", Pages: 1})
	var te *ThrottledError
	require.ErrorAs(t, err, &te)
	require.Equal(t, WaitBudget, te.Reason)
	require.Equal(t, 10*time.Second, te.For)
	p, err = l.Acquire(ctx, Request{JobID: "c", Resend: true, Pages: 1})
	require.NoError(t, err, "the resend has its token and its slot")
	p.Done(ctx, false, true, 0)

	clk.add(12*time.Hour - 1100*time.Millisecond - 5*time.Second) // 5 s before midnight
	_, err = l.Acquire(ctx, Request{JobID: "d", Pages: 1})
	require.ErrorAs(t, err, &te)
	require.Equal(t, 5*time.Second, te.For, "until the day ends")
}

// TestLongWaitKeepsItsAge: a job held back again and again for more than
// ten minutes keeps how long it has waited (its claim to go first), while
// one that did not ask again by the time it would have is forgotten.
func TestLongWaitKeepsItsAge(t *testing.T) {
	clk := &budgetClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := budgetLimiter(t, accounts.Limits{DailyPages: 1}, clk)
	_ = l.throttle("default", "held", WaitBudget, 10*time.Second)
	_ = l.throttle("default", "gone", WaitBudget, 10*time.Second)
	for range 66 {
		clk.add(10 * time.Second)
		l.snapshotWaiting(clk.now())
		_ = l.throttle("default", "held", WaitBudget, 10*time.Second)
	}
	require.Equal(t, 11*time.Minute, l.WaitedFor("", "held"))
	require.Zero(t, l.WaitedFor("", "gone"), "forgotten")
	require.Equal(t, 1, l.snapshotWaiting(clk.now())["default"].Jobs)
}

// TestWaitingForgetsJobsThatDoNotComeBack: a job held back counts as
// waiting until it could have asked again (its retry at the latest, and a
// grace), not for minutes: one that went on at another engine, or ended,
// leaves the count.
func TestWaitingForgetsJobsThatDoNotComeBack(t *testing.T) {
	clk := &budgetClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := budgetLimiter(t, accounts.Limits{MaxInFlight: 1}, clk)
	_ = l.throttle("default", "a", WaitInFlight, 100*time.Millisecond)
	_ = l.throttle("default", "b", WaitInFlight, 100*time.Millisecond)
	require.Equal(t, 2, l.snapshotWaiting(clk.now())["default"].Jobs)
	l.notWaiting("default", "b") // its step ended without a permit: done, say
	require.Equal(t, 1, l.snapshotWaiting(clk.now())["default"].Jobs)
	clk.add(accounts.RetryBound(100*time.Millisecond, 0) + retryGrace)
	require.Equal(t, 1, l.snapshotWaiting(clk.now())["default"].Jobs, "it may still come back")
	clk.add(time.Millisecond)
	require.Zero(t, l.snapshotWaiting(clk.now())["default"].Jobs, "it did not come back in time")
}

// TestResendSettlesItsKeysPages: the pages a key's first send reserved
// stay reserved while its outcome is unknown; the answer a resend of the
// key gets settles them: given back when nothing was bought, made exact
// when something was, kept when it is still unknown.
func TestResendSettlesItsKeysPages(t *testing.T) {
	clk := &budgetClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := budgetLimiter(t, accounts.Limits{DailyPages: 2}, clk)
	ctx := context.Background()
	day := accounts.Day(clk.now())
	first := clk.now()

	p, err := l.Acquire(ctx, Request{JobID: "a", Pages: 1})
	require.NoError(t, err)
	p.Done(ctx, false, false, 0) // unknown: kept
	require.Equal(t, 1, spentOn(t, l, day))
	p, err = l.Acquire(ctx, Request{JobID: "a", Resend: true, Pages: 1, FirstSend: first})
	require.NoError(t, err)
	p.Done(ctx, false, false, 0) // unknown again: still kept
	require.Equal(t, 1, spentOn(t, l, day))
	p, err = l.Acquire(ctx, Request{JobID: "a", Resend: true, Pages: 1, FirstSend: first})
	require.NoError(t, err)
	p.Done(ctx, false, true, 0) // a replayed 408: nothing was bought
	require.Equal(t, 0, spentOn(t, l, day))

	p, err = l.Acquire(ctx, Request{JobID: "a", Pages: 1}) // the new key
	require.NoError(t, err)
	p.Done(ctx, false, false, 0)
	p, err = l.Acquire(ctx, Request{JobID: "a", Resend: true, Pages: 1, FirstSend: clk.now()})
	require.NoError(t, err)
	p.Done(ctx, true, true, 1) // a replayed 200: one page bought in all
	require.Equal(t, 1, spentOn(t, l, day))
	p, err = l.Acquire(ctx, Request{JobID: "b", Pages: 1})
	require.NoError(t, err, "the second page of the budget is free")
	p.Unused(ctx)
}

// TestUnsentResendKeepsItsKeysPages: a key whose first send reserved a
// page and whose outcome is unknown is resent; the resend never leaves
// (its deadline came: DeadlineReached, not Sent). The page stays
// reserved: the first send may have bought it, and its reconciliation
// settles it. It was given back, so a charge went uncounted (and a
// refund on "not charged" took a second page off).
func TestUnsentResendKeepsItsKeysPages(t *testing.T) {
	ctx := context.Background()
	clk := &budgetClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := budgetLimiter(t, accounts.Limits{DailyPages: 5}, clk)
	day := accounts.Day(clk.now())
	first, err := l.Acquire(ctx, Request{JobID: "j", Pages: 1})
	require.NoError(t, err)
	first.Done(ctx, false, false, 0) // unknown: the page stays reserved
	require.Equal(t, 1, spentOn(t, l, day))

	resend, err := l.Acquire(ctx, Request{JobID: "j", Resend: true, Pages: 1, FirstSend: clk.now()})
	require.NoError(t, err)
	resend.Unused(ctx)
	require.Equal(t, 1, spentOn(t, l, day), "the key's page stays reserved")
}

// TestBusyAccountKeysDoNotFailSearches: 64 workers of one engine start
// searches of one account at once, with a rate and a budget far from
// reached. Each start updates the account's rate and spend keys; without
// backing off, the compare-and-set rounds ran out and searches failed
// ("keeps changing"), and budget settlements were dropped. Now none fails,
// and the day's spend counts every page.
func TestBusyAccountKeysDoNotFailSearches(t *testing.T) {
	ctx := context.Background()
	clk := &budgetClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := budgetLimiter(t, accounts.Limits{RatePerSec: 100000, Burst: 100000, DailyPages: 1000000}, clk)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		failures []error
		started  int
	)
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				p, err := l.Acquire(ctx, Request{JobID: fmt.Sprintf("j%d-%d", w, i), Pages: 1})
				var te *ThrottledError
				mu.Lock()
				switch {
				case errors.As(err, &te):
				case err != nil:
					failures = append(failures, err)
				default:
					started++
				}
				mu.Unlock()
				if err == nil {
					p.Done(ctx, true, true, 1)
				}
			}
		}()
	}
	wg.Wait()
	require.Empty(t, failures)
	require.Equal(t, started, spentOn(t, l, accounts.Day(clk.now())), "every bought page counted")
}

// TestReservationMovesToTheKeysDay: a page reserved at 23:59:59.999 for a
// key first sent at 00:00:00.001 counts on the key's day, where its
// answer and any refund settle it; it stayed on the day before for good.
func TestReservationMovesToTheKeysDay(t *testing.T) {
	ctx := context.Background()
	clk := &budgetClock{t: time.Date(2026, 12, 2, 23, 59, 59, 999e6, time.UTC)}
	l := budgetLimiter(t, accounts.Limits{DailyPages: 5}, clk)
	p, err := l.Acquire(ctx, Request{JobID: "j", Pages: 1})
	require.NoError(t, err)
	require.Equal(t, 1, spentOn(t, l, "2026-12-02"))
	firstSend := time.Date(2026, 12, 3, 0, 0, 0, 1e6, time.UTC)
	p.OnDay(ctx, firstSend)
	require.Equal(t, 0, spentOn(t, l, "2026-12-02"))
	require.Equal(t, 1, spentOn(t, l, "2026-12-03"))
	p.Done(ctx, false, true, 0) // definitely not billed
	require.Equal(t, 0, spentOn(t, l, "2026-12-03"), "settled on the day it counts on")
}
