package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/serpent-engine/serpent/accounts"
)

// WaitingValue is what one worker tells of the jobs it holds back for an
// account, under wait.<account>.<worker>.
type WaitingValue struct {
	Worker   string         `json:"worker"`
	Jobs     int            `json:"jobs"`
	ByReason map[string]int `json:"by_reason"`
	At       time.Time      `json:"at"`
	// Refused is set while the account's stored limits are refused: what
	// this worker applies instead.
	Refused *Applied `json:"refused,omitempty"`
}

// WaitingFresh is how old a WaitingValue may be and still count.
const WaitingFresh = 15 * time.Second

func (l *Limiter) throttle(acct, jobID, reason string, d time.Duration) error {
	return l.throttleSpread(acct, jobID, reason, d, nil)
}

// throttleSpread records a job held back for d, and says how widely the
// jobs held back spread their asks: spread, given how many the account's
// limits hold back in this process (nil for the default). The job counts
// as waiting until it could have asked again, and a little more.
func (l *Limiter) throttleSpread(acct, jobID, reason string, d time.Duration, spread func(waiting int) time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	jobs := l.waiting[acct]
	if jobs == nil {
		jobs = map[string]waitReason{}
		l.waiting[acct] = jobs
	}
	now := l.now()
	since := now
	if w, ok := jobs[jobID]; ok {
		since = w.since
	}
	var s time.Duration
	if spread != nil {
		s = spread(len(jobs) + 1)
	}
	jobs[jobID] = waitReason{reason: reason, since: since, until: now.Add(accounts.RetryBound(d, s) + retryGrace)}
	return &ThrottledError{Account: acct, Reason: reason, For: d, Spread: s}
}

// retryGrace is how much later than it could have a held-back job may ask
// again and still count as waiting: a redelivery, or a busy worker. A job
// that does not come back by then went on elsewhere, or ended.
const retryGrace = 5 * time.Second

func (l *Limiter) notWaiting(acct, jobID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiting[acct], jobID)
}

// WaitedFor is how long a job has been held back by its account.
func (l *Limiter) WaitedFor(account, jobID string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, ok := l.waiting[accountKey(account)][jobID]; ok {
		return l.now().Sub(w.since)
	}
	return 0
}

// publishWaiting writes this worker's waiting jobs every few seconds, so
// status views can show who waits for what over every process. A job not
// seen held back for a while is forgotten (it went on, or another worker
// has it); one held back again and again keeps how long it has waited.
// When ctx ends it deletes what it wrote; at its start and every hour it
// deletes what workers gone without doing so (killed, or a host and pid
// name never used again) left more than an hour ago.
func (l *Limiter) publishWaiting(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	written := map[string]bool{}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		for key := range written {
			_, _ = l.kv.Delete(dctx, key, 0)
		}
	}()
	sweep := time.Time{}
	for {
		if now := l.now(); now.Sub(sweep) >= time.Hour {
			sweep = now
			l.sweepWaiting(ctx, now.Add(-time.Hour))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for acct, v := range l.snapshotWaiting(l.now()) {
			key := "wait." + acct + "." + keyToken(l.worker)
			data, err := json.Marshal(v)
			if err == nil {
				err = l.kv.Put(ctx, key, data)
			}
			if err == nil {
				written[key] = true
			} else if ctx.Err() == nil {
				l.log.Debug("limiter: waiting jobs not published", "account", acct, "err", err)
			}
		}
	}
}

// sweepWaiting deletes the waiting-jobs values written before cutoff,
// each only if it was not written again meanwhile, and purges what the
// deletions of waiting-jobs values older than markerAge left behind.
func (l *Limiter) sweepWaiting(ctx context.Context, cutoff time.Time) {
	keys, err := l.kv.Keys(ctx, "wait.>")
	if err != nil {
		return
	}
	for _, key := range keys {
		v, rev, err := l.kv.Get(ctx, key)
		if err != nil || rev == 0 {
			continue
		}
		var w WaitingValue
		if json.Unmarshal(v, &w) == nil && w.At.Before(cutoff) {
			_, _ = l.kv.Delete(ctx, key, rev)
		}
	}
	if err := l.kv.PurgeDeleted(ctx, "wait.>", l.now().Add(-l.markerAge)); err != nil && ctx.Err() == nil {
		l.log.Debug("limiter: old deletions of waiting-jobs values not purged", "err", err)
	}
}

// snapshotWaiting counts the jobs held back per account and reason,
// forgetting those that did not ask again in time, and tells what it
// applies to accounts whose stored limits are refused.
func (l *Limiter) snapshotWaiting(now time.Time) map[string]WaitingValue {
	l.mu.Lock()
	defer l.mu.Unlock()
	values := map[string]WaitingValue{}
	for acct, jobs := range l.waiting {
		v := WaitingValue{Worker: l.worker, ByReason: map[string]int{}, At: now}
		for job, w := range jobs {
			if now.After(w.until) {
				delete(jobs, job)
				continue
			}
			v.Jobs++
			v.ByReason[w.reason]++
		}
		values[acct] = v
	}
	for acct := range l.refused {
		v, ok := values[acct]
		if !ok {
			v = WaitingValue{Worker: l.worker, ByReason: map[string]int{}, At: now}
		}
		v.Refused = &Applied{Held: l.heldLocked(acct), Limits: l.limits[acct]}
		values[acct] = v
	}
	return values
}

// keyToken makes a worker name usable as one KV key token.
func keyToken(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}
