package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/serpent-engine/serpent/accounts"
)

// Limiter enforces each API account's limits over every worker in every
// process: the state it shares lives in a bucket every engine shares
// (serp_accounts), so a limit holds however many engines run, and a
// changed limit applies at once (every limiter watches the bucket).
//
// Keys: limits.<account> (set by operators), slot.<account>.<n> (a search
// in flight, held until it ends or its lease runs out), rate.<account> (the
// rate limiter's theoretical arrival time), pause.<account> (until when
// the API asked the account to slow down), spend.<account>.<day> (pages
// bought, or in flight, that UTC day) and wait.<account>.<worker> (how many
// jobs a worker holds back, and why).
type Limiter struct {
	kv     WatchBucket
	worker string
	now    func() time.Time
	lease  time.Duration
	log    *slog.Logger

	mu     sync.Mutex
	limits map[string]accounts.Limits
	// refused are the accounts whose stored limits do not decode (or are
	// out of bounds): they keep the limits applied before, if any.
	refused map[string]refusal
	pauses  map[string]time.Time
	slots   map[string]slotValue // slot key -> its holder
	// seen is the last revision of the bucket the watcher applied; moved
	// is closed when it moves on (see fence).
	seen  uint64
	moved chan struct{}
	// markerAge is how old a delete marker must be to be purged.
	markerAge time.Duration
	freed     map[string]chan struct{}         // account -> closed when one of its slots frees
	waiting   map[string]map[string]waitReason // account -> job -> why
	stop      func()
}

// hold is how long a search waits in the process for a slot of its
// account before its job goes back to wait on its timer.
const hold = time.Second

// slotMargin is how long a slot outlasts the lease it is taken for. The
// claim's lease starts a moment after the slot is taken (after the rate
// token and the budget), and a search may run until the lease ends: the
// slot of a worker that died must be held that long at least.
const slotMargin = 30 * time.Second

type waitReason struct {
	reason string
	since  time.Time // first held back
	until  time.Time // forgotten after: it would have asked again by then
}

// Reasons a job waits for its account.
const (
	WaitPaused   = "paused"    // the API asked the account to slow down
	WaitInFlight = "in_flight" // as many searches in flight as allowed
	WaitRate     = "rate"      // the rate limit
	WaitBudget   = "budget"    // the day's budget is spent
	WaitRefused  = "refused"   // the stored limits are refused, and none were applied before
)

// WaitReasons are the reasons a job waits for its account.
var WaitReasons = []string{WaitInFlight, WaitRate, WaitPaused, WaitBudget, WaitRefused}

// ThrottledError says a job may not start a search now and for how long
// its account is held back. Nothing was written; the job waits.
type ThrottledError struct {
	Account string
	Reason  string
	For     time.Duration
	// Spread is how widely the jobs held back for the same moment should
	// spread their next asks (accounts.Retry); 0 for the default.
	Spread time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("account %q is held back (%s) for %s", e.Account, e.Reason, e.For)
}

// NewLimiter starts a limiter on the accounts' bucket kv (serp_accounts).
// lease is how long a slot of a crashed worker stays taken at least; a
// Request with a longer Lease holds its slot for that. Close stops it.
func NewLimiter(ctx context.Context, kv WatchBucket, worker string, lease time.Duration, now func() time.Time, log *slog.Logger) (*Limiter, error) {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Limiter{kv: kv, worker: worker, now: now, lease: lease, log: log, markerAge: time.Hour, limits: map[string]accounts.Limits{},
		refused: map[string]refusal{}, pauses: map[string]time.Time{}, slots: map[string]slotValue{}, moved: make(chan struct{}),
		freed: map[string]chan struct{}{}, waiting: map[string]map[string]waitReason{}}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ready := make(chan struct{})
	stopWatch, err := kv.Watch(wctx, []string{"limits.*", "pause.*", "slot.>"}, l.apply, func() { close(ready) })
	if err != nil {
		cancel()
		return nil, fmt.Errorf("limiter: %w", err)
	}
	published := make(chan struct{})
	go func() { defer close(published); l.publishWaiting(wctx) }()
	l.stop = func() { cancel(); stopWatch(); <-published }
	select {
	case <-ready:
	case <-ctx.Done():
		l.Close()
		return nil, ctx.Err()
	}
	return l, nil
}

// Close stops watching.
func (l *Limiter) Close() { l.stop() }

// apply takes one value or change of the bucket into the limiter's view.
func (l *Limiter) apply(key string, value []byte, rev uint64, deleted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.moveOn(rev)
	switch kind, rest, _ := strings.Cut(key, "."); kind {
	case "limits":
		if deleted {
			delete(l.limits, rest)
			delete(l.refused, rest)
			break
		}
		lim, err := accounts.Decode(value)
		if err != nil {
			l.refuse(rest, value, err)
			break
		}
		delete(l.refused, rest)
		l.limits[rest] = lim
	case "pause":
		var p pauseValue
		if deleted || json.Unmarshal(value, &p) != nil {
			delete(l.pauses, rest)
		} else {
			l.pauses[rest] = p.Until
		}
	case "slot":
		var s slotValue
		if deleted || json.Unmarshal(value, &s) != nil {
			delete(l.slots, key)
			acct, _, _ := strings.Cut(rest, ".")
			if ch, ok := l.freed[acct]; ok {
				close(ch)
				delete(l.freed, acct)
			}
		} else {
			l.slots[key] = s
		}
	}
}

// freedSignal returns a channel closed when a slot of the account frees.
func (l *Limiter) freedSignal(acct string) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	ch, ok := l.freed[acct]
	if !ok {
		ch = make(chan struct{})
		l.freed[acct] = ch
	}
	return ch
}

// Limits returns an account's limits as this limiter knows them.
func (l *Limiter) Limits(account string) accounts.Limits {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.limits[accountKey(account)]
}

type slotValue struct {
	Worker string    `json:"worker"`
	Job    string    `json:"job"`
	Until  time.Time `json:"until"`
}

type pauseValue struct {
	Until  time.Time `json:"until"`
	Reason string    `json:"reason"`
}

type rateValue struct {
	TAT time.Time `json:"tat"`
}

// accountKey is the name an account has in keys: "default" for "".
func accountKey(account string) string {
	if account == "" {
		return "default"
	}
	return account
}

// Permit is one search's place within its account's limits. Done gives it
// back, with what the search bought.
type Permit struct {
	l        *Limiter
	account  string
	slot     string
	slotRev  uint64
	reserved int
	day      string
	price    int64
	// settles: the reserved pages are an earlier send's (a resend's key
	// reserved them when it was first sent); this permit's answer may
	// settle them, but a resend that never leaves keeps them reserved.
	settles bool
	// running: the search may still run at the API (its outcome is
	// unknown, or the API said it is in progress); Done keeps its slot.
	running bool
	// ownOld is the slot's value before this permit took it over from the
	// job's earlier search, which may still run: given back unused, or
	// with nothing that says the key's search is over, it is restored.
	ownOld []byte
	// written is the slot value this permit wrote: if another delivery of
	// the job took the slot over and gave it back meanwhile, the value is
	// this permit's again under a newer revision.
	written []byte
}

// Request is one search that asks to start.
type Request struct {
	Account string
	JobID   string
	// Resend is a resend of a key sent before: it cannot buy anything, so
	// the budget does not hold it back (it still counts in flight and
	// against the rate).
	Resend bool
	// High goes before others waiting in this process for a slot.
	High bool
	// Pages is what the search may bill.
	Pages int
	// Lease is the job's claim lease: its search can run until the lease
	// ends, so its slot is held that long if its worker dies (at least
	// the limiter's own lease), and slotMargin more.
	Lease time.Duration
	// FirstSend is when a resend's key was first sent: the day its pages
	// were reserved on. They stay reserved while the key's outcome is
	// unknown, and the resend's answer settles them (Permit.Done).
	FirstSend time.Time
}

// Acquire asks to start one search. When the account has no free slot the
// search waits in the process a moment for one (high-priority searches
// take a freed slot first); it returns a *ThrottledError when the account
// must wait longer.
func (l *Limiter) Acquire(ctx context.Context, r Request) (*Permit, error) {
	account, jobID, resend, pages := r.Account, r.JobID, r.Resend, r.Pages
	acct := accountKey(account)
	now := l.now()
	l.mu.Lock()
	lim, pause, held := l.limits[acct], l.pauses[acct], l.heldLocked(acct)
	l.mu.Unlock()
	if now.Before(pause) {
		return nil, l.throttle(acct, jobID, WaitPaused, pause.Sub(now))
	}
	if held && !resend {
		// No limits known: a new purchase could break any of them.
		return nil, l.throttle(acct, jobID, WaitRefused, refusedRetry)
	}
	p := &Permit{l: l, account: acct, price: lim.Price()}
	if lim.Unlimited() {
		l.notWaiting(acct, jobID)
		return p, nil
	}
	budgeted := !resend && lim.Budgeted()
	if budgeted {
		// A day's budget spent holds the search back before it takes a
		// slot or a rate token, which a resend (it cannot buy) may need
		// to make its key's deadline.
		if fits, err := l.budgetFits(ctx, acct, lim, pages, now); err != nil {
			return nil, err
		} else if !fits {
			return nil, l.throttle(acct, jobID, WaitBudget, budgetRetry(now))
		}
	}
	if lim.MaxInFlight > 0 {
		if err := l.waitForSlot(ctx, p, r); err != nil {
			return nil, err
		}
		// The account may have been paused, or its limits changed, while
		// this search waited for its slot.
		now = l.now()
		l.mu.Lock()
		lim, pause = l.limits[acct], l.pauses[acct]
		l.mu.Unlock()
		if now.Before(pause) {
			p.release(context.WithoutCancel(ctx))
			return nil, l.throttle(acct, jobID, WaitPaused, pause.Sub(now))
		}
	}
	if lim.RatePerSec > 0 {
		wait, err := l.takeRate(ctx, acct, lim, now)
		if errors.Is(err, errContended) {
			err, wait = nil, contendedRetry // busy: wait a moment, as for the rate
		}
		if err != nil || wait > 0 {
			p.release(context.WithoutCancel(ctx))
			if err != nil {
				return nil, err
			}
			return nil, l.throttleSpread(acct, jobID, WaitRate, wait, lim.RateSpread)
		}
	}
	if budgeted {
		day := accounts.Day(now)
		fits := false
		err := l.update(ctx, "spend."+acct+"."+day, func(old []byte) ([]byte, error) {
			s, err := decodeSpend(old)
			if err != nil {
				return nil, err
			}
			if fits = lim.Fits(s, pages); !fits {
				return nil, nil
			}
			return json.Marshal(s.Add(pages, lim.Price()))
		})
		if errors.Is(err, errContended) {
			p.release(context.WithoutCancel(ctx))
			return nil, l.throttle(acct, jobID, WaitBudget, contendedRetry)
		}
		if err != nil || !fits {
			p.release(context.WithoutCancel(ctx))
			if err != nil {
				return nil, err
			}
			return nil, l.throttle(acct, jobID, WaitBudget, budgetRetry(now))
		}
		p.reserved, p.day = pages, day
	}
	if resend && !r.FirstSend.IsZero() && lim.Budgeted() {
		// The key's first send reserved its pages; this answer settles them.
		p.reserved, p.day, p.settles = pages, accounts.Day(r.FirstSend), true
	}
	l.notWaiting(acct, jobID)
	return p, nil
}

// budgetFits reads whether the day's spend leaves room for pages more.
func (l *Limiter) budgetFits(ctx context.Context, acct string, lim accounts.Limits, pages int, now time.Time) (bool, error) {
	old, _, err := l.kv.Get(ctx, "spend."+acct+"."+accounts.Day(now))
	if err != nil {
		return false, err
	}
	s, err := decodeSpend(old)
	if err != nil {
		return false, err
	}
	return lim.Fits(s, pages), nil
}

// decodeSpend reads a day's spend value; none is nothing spent.
func decodeSpend(b []byte) (accounts.Spend, error) {
	var s accounts.Spend
	if b == nil {
		return s, nil
	}
	err := json.Unmarshal(b, &s)
	return s, err
}

// budgetRetry is how long a search held back by a spent budget waits: ten
// seconds (a raised limit is seen within them; asking again costs one read,
// no slot and no rate token), or less if the day ends first.
func budgetRetry(now time.Time) time.Duration {
	midnight := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	return max(min(10*time.Second, midnight.Sub(now)), time.Second)
}

// takeRate advances the account's rate limiter, or says how long to wait.
func (l *Limiter) takeRate(ctx context.Context, acct string, lim accounts.Limits, now time.Time) (time.Duration, error) {
	var wait time.Duration
	err := l.update(ctx, "rate."+acct, func(old []byte) ([]byte, error) {
		var r rateValue
		if old != nil {
			if err := json.Unmarshal(old, &r); err != nil {
				return nil, err
			}
		}
		next, w, ok := lim.Rate(r.TAT, now)
		if wait = w; !ok {
			return nil, nil
		}
		return json.Marshal(rateValue{TAT: next})
	})
	return wait, err
}

// MayStillRun says the search may still be running at the API: its
// outcome is unknown, or the API answered that it is in progress. Done
// then keeps its slot taken, as a dead worker's is, until the lease it
// was taken for ends (the search is over by then) or the job's next send
// of the key takes it over (takeSlot): the account's searches in flight
// stay within its cap.
func (p *Permit) MayStillRun() {
	if p != nil {
		p.running = true
	}
}

// SearchOver says the answer settles that the key's search has ended (a
// result, a confirmed failure of the search, a charge whose reply is
// lost): an earlier search of the job whose slot this permit took over is
// over too, and Done frees the slot.
func (p *Permit) SearchOver() {
	if p != nil {
		p.ownOld = nil
	}
}

// Done gives the permit back. class and pages tell what the search did: a
// result bills its pages, a definite outcome that ran nothing or was not
// billed bills nothing, anything else (unknown, in progress, replay
// unavailable) keeps what was reserved, since it may have been billed.
func (p *Permit) Done(ctx context.Context, billed, definite bool, pages int) {
	if p == nil {
		return
	}
	if p.running {
		p.slot = "" // held until its lease ends, or its key's resend takes it
	} else {
		p.release(ctx) // the earlier search's hold comes back, if there was one
	}
	if p.reserved == 0 {
		return
	}
	switch {
	case billed:
		p.adjust(ctx, pages-p.reserved)
	case definite:
		p.adjust(ctx, -p.reserved)
	}
}

// OnDay moves the pages the permit reserved to the UTC day of at, the
// key's first send: a reservation made just before midnight for a key
// first sent just after counts on the key's day, where its answer, or a
// reconciliation, settles it.
func (p *Permit) OnDay(ctx context.Context, at time.Time) {
	if p == nil || p.settles || p.reserved == 0 || p.day == "" || accounts.Day(at) == p.day {
		return
	}
	p.adjust(ctx, -p.reserved)
	p.day = accounts.Day(at)
	p.adjust(ctx, p.reserved)
}

// Unused gives back a permit whose search never left, and the pages it
// reserved; a resend's key keeps what its first send reserved (its
// outcome is still open).
func (p *Permit) Unused(ctx context.Context) {
	if p == nil {
		return
	}
	p.release(ctx)
	if !p.settles {
		p.adjust(ctx, -p.reserved)
	}
}

func (p *Permit) adjust(ctx context.Context, pages int) {
	if pages == 0 || p.day == "" {
		return
	}
	if err := p.l.update(ctx, "spend."+p.account+"."+p.day, func(old []byte) ([]byte, error) {
		s, err := decodeSpend(old)
		if err != nil {
			return nil, err
		}
		return json.Marshal(s.Add(pages, p.price))
	}); err != nil {
		p.l.log.Warn("limiter: spend not adjusted", "account", p.account, "pages", pages, "err", err)
	}
}

// release frees the permit's slot, or, if it took the slot over from the
// job's earlier search (ownOld), gives that search its hold back.
func (p *Permit) release(ctx context.Context) {
	if p.slot == "" {
		return
	}
	kv, rev := p.l.kv, p.slotRev
	give := func() (bool, error) {
		if p.ownOld != nil {
			_, ok, err := kv.Write(ctx, p.slot, p.ownOld, rev)
			return ok, err
		}
		return kv.Delete(ctx, p.slot, rev)
	}
	ok, err := give()
	if err == nil && !ok && p.written != nil {
		// Another delivery of the job took the slot over and gave it
		// back: the value is this permit's again, at a newer revision.
		if v, cur, gerr := kv.Get(ctx, p.slot); gerr == nil && cur != 0 && bytes.Equal(v, p.written) {
			rev = cur
			_, err = give()
		}
	}
	if err != nil {
		p.l.log.Warn("limiter: slot not released; it frees itself when its lease ends", "slot", p.slot, "err", err)
	}
	p.slot, p.ownOld, p.written = "", nil, nil
}

// Refund gives back pages of the spend of the day of at that turned out
// not to be bought (a reconciliation that found no charge); at is when
// they were reserved, the key's first send.
func (l *Limiter) Refund(ctx context.Context, account string, pages int, at time.Time) {
	acct := accountKey(account)
	if !l.Limits(account).Budgeted() {
		return
	}
	(&Permit{l: l, account: acct, day: accounts.Day(at), price: l.Limits(account).Price()}).adjust(ctx, -pages)
}

// Pause holds the whole account back until the given time: the API said
// (429, Retry-After) that every search of the account should slow down.
func (l *Limiter) Pause(ctx context.Context, account string, until time.Time, reason string) {
	acct := accountKey(account)
	err := l.update(ctx, "pause."+acct, func(old []byte) ([]byte, error) {
		var p pauseValue
		if old != nil && json.Unmarshal(old, &p) == nil && !p.Until.Before(until) {
			return nil, nil // already paused as long
		}
		return json.Marshal(pauseValue{Until: until, Reason: reason})
	})
	if err != nil {
		l.log.Warn("limiter: pause not recorded", "account", acct, "err", err)
		return
	}
	l.mu.Lock()
	if until.After(l.pauses[acct]) {
		l.pauses[acct] = until
	}
	l.mu.Unlock()
}

// pausedFor is how long the account (its key name) stays paused from now.
func (l *Limiter) pausedFor(acct string) time.Duration {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	return max(l.pauses[acct].Sub(now), 0)
}

// update changes one key with compare-and-set; fn returns nil to leave it.
func (l *Limiter) update(ctx context.Context, key string, fn func(old []byte) ([]byte, error)) error {
	give := time.Now().Add(updatePatience)
	for attempt := 0; ; attempt++ {
		old, rev, err := l.kv.Get(ctx, key)
		if err != nil {
			return fmt.Errorf("limiter: read %s: %w", key, err)
		}
		value, err := fn(old)
		if err != nil || value == nil {
			return err
		}
		_, ok, err := l.kv.Write(ctx, key, value, rev)
		if err == nil && !ok {
			// Changed meanwhile, by one of the many workers that share
			// the key: back off a random moment, so they spread out.
			if time.Now().After(give) {
				return fmt.Errorf("%w: %s kept changing for %s", errContended, key, updatePatience)
			}
			sleep(ctx, time.Duration(rand.Int64N(int64(min(time.Millisecond<<min(attempt, 6), 50*time.Millisecond))+1)))
			continue
		}
		return err
	}
}

// updatePatience bounds how long update tries a key other workers keep
// changing.
const updatePatience = 2 * time.Second

// contendedRetry is how long a search waits when its account's shared
// state was too busy to update.
const contendedRetry = 250 * time.Millisecond

// errContended: a shared key kept changing under update.
var errContended = errors.New("limiter: contended")

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
