package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The cap counts every search in flight, whatever slot holds it: after a
// lowering, searches that hold slots at or above the new cap still run. A
// new search may take slot i only if i < k, where k is the largest number
// with k + (live slots at k or above, of other jobs) <= cap (slotsBelow).
//
// Why the total stays within the cap. Slots are taken with compare-and-set,
// so the slots below any k are at most k. A limiter that applied a cap
// creates no slot at or above it, and checks each slot it took against the
// bucket as it stood when the slot was written (fence): the slots written
// before, and the cap applied then, are in that view. Among the searches
// let start under the cap, take the one whose check found the largest k:
// every other search holds a slot below k (those let start under the cap
// take slots below their own k), or one at or above k written before that
// check, so counted in it. The searches in flight are at most k plus that
// count: within the cap. A job's own slot (its earlier search, which may
// still run) is the same search, so it may always take it over, at any
// index.

// waitForSlot takes a slot, waiting up to hold for one to free. A normal
// search lets a high one try first when a slot frees.
func (l *Limiter) waitForSlot(ctx context.Context, p *Permit, r Request) error {
	timeout := time.NewTimer(hold)
	defer timeout.Stop()
	for {
		freed := l.freedSignal(p.account)
		ok, err := p.takeSlot(ctx, r.JobID, max(l.lease, r.Lease)+slotMargin, l.now())
		if err != nil || ok {
			return err
		}
		l.throttle(p.account, r.JobID, WaitInFlight, 0)
		select {
		case <-freed:
			if !r.High {
				select {
				case <-time.After(20 * time.Millisecond):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		case <-timeout.C:
			return l.throttle(p.account, r.JobID, WaitInFlight, 100*time.Millisecond)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// takeSlot takes a slot of the account for lease, or reports that its cap
// allows no more searches now. A slot whose holder's lease ran out is free.
func (p *Permit) takeSlot(ctx context.Context, jobID string, lease time.Duration, now time.Time) (bool, error) {
	l := p.l
	value, err := json.Marshal(slotValue{Worker: l.worker, Job: jobID, Until: now.Add(lease)})
	if err != nil {
		return false, err
	}
	prefix := "slot." + p.account + "."
	for _, i := range l.slotCandidates(p.account, jobID, now) {
		key := prefix + strconv.Itoa(i)
		l.mu.Lock()
		held, ok := l.slots[key]
		l.mu.Unlock()
		if ok && now.Before(held.Until) && held.Job != jobID {
			continue
		}
		var own []byte
		rev, ok, err := l.kv.Write(ctx, key, value, 0)
		if err == nil && !ok {
			held, heldRev, gerr := l.kv.Get(ctx, key)
			if gerr != nil {
				continue
			}
			var s slotValue
			if json.Unmarshal(held, &s) == nil && now.Before(s.Until) {
				if s.Job != jobID {
					continue // taken meanwhile
				}
				own = held // the job's earlier search's: taken over
			}
			if rev, ok, err = l.kv.Write(ctx, key, value, heldRev); err == nil && !ok {
				continue
			}
		}
		if err != nil {
			return false, fmt.Errorf("limiter: take %s: %w", key, err)
		}
		p.slot, p.slotRev, p.ownOld, p.written = key, rev, own, value
		if own != nil {
			return true, nil // the same search: it counted before
		}
		if !l.fence(ctx, rev) {
			p.release(context.WithoutCancel(ctx))
			return false, ctx.Err()
		}
		l.mu.Lock()
		k := l.slotsBelow(p.account, jobID, now)
		l.mu.Unlock()
		if i >= k {
			// Written as the cap was lowered, or as other limiters took
			// slots this one had not seen yet.
			p.release(context.WithoutCancel(ctx))
			return false, nil
		}
		return true, nil
	}
	return false, nil
}

// slotCandidates are the slots a search of the job may take: its own kept
// slot first, then those below slotsBelow, from a random one on.
func (l *Limiter) slotCandidates(acct, jobID string, now time.Time) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	prefix := "slot." + acct + "."
	for key, s := range l.slots {
		if i, err := strconv.Atoi(strings.TrimPrefix(key, prefix)); err == nil && strings.HasPrefix(key, prefix) && s.Job == jobID && now.Before(s.Until) {
			out = append(out, i)
			break
		}
	}
	k := l.slotsBelow(acct, jobID, now)
	start := 0
	if k > 0 {
		start = rand.IntN(k)
	}
	for j := range k {
		if i := (start + j) % k; !slices.Contains(out, i) {
			out = append(out, i)
		}
	}
	return out
}

// slotsBelow is how many of the account's first slots a new search of the
// job may take from: the largest k with k plus the live slots of other
// jobs at k or above within the cap. l.mu is held.
func (l *Limiter) slotsBelow(acct, jobID string, now time.Time) int {
	n := l.limits[acct].MaxInFlight
	if n <= 0 {
		return 0
	}
	prefix := "slot." + acct + "."
	var held []int
	for key, s := range l.slots {
		i, err := strconv.Atoi(strings.TrimPrefix(key, prefix))
		if err == nil && strings.HasPrefix(key, prefix) && s.Job != jobID && now.Before(s.Until) {
			held = append(held, i)
		}
	}
	slices.Sort(held)
	// k + (slots at k or above) never falls as k grows: the largest k
	// within the cap ends the first run of those that are.
	best, j := 0, 0 // held[j:] are at k or above
	for k := 0; k <= n; k++ {
		for j < len(held) && held[j] < k {
			j++
		}
		if k+len(held)-j > n {
			break
		}
		best = k
	}
	return best
}

// fence waits until the watcher has applied the bucket up to rev: the
// limiter's view then holds every slot and limit written before it. It
// reports false if that took longer than fenceWait, or ctx ended.
func (l *Limiter) fence(ctx context.Context, rev uint64) bool {
	t := time.NewTimer(fenceWait)
	defer t.Stop()
	for {
		l.mu.Lock()
		seen, moved := l.seen, l.moved
		l.mu.Unlock()
		if seen >= rev {
			return true
		}
		select {
		case <-moved:
		case <-t.C:
			l.log.Debug("limiter: the bucket's watcher is behind; a slot taken is given back", "revision", rev)
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// fenceWait bounds the wait for the watcher: it echoes a slot within
// milliseconds, unless the server or this process is overloaded.
const fenceWait = 5 * time.Second

// moveOn records that the watcher applied rev; l.mu is held.
func (l *Limiter) moveOn(rev uint64) {
	if rev > l.seen {
		l.seen = rev
		close(l.moved)
		l.moved = make(chan struct{})
	}
}
