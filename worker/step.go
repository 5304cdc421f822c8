package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/store"
)

// maxRounds bounds how often one Step reloads a job. Each round either
// makes progress or learns that another writer did, so a handful suffice.
const maxRounds = 16

// ErrNoSuchJob is returned by Step for a wake-up of a job with no events.
var ErrNoSuchJob = errors.New("worker: no such job")

// Step takes a job as far as it can go now: it claims and sends, records
// outcomes, reconciles, until the job must wait or is done. It returns what
// comes next; the caller arms the timer for a wait and then acknowledges the
// delivery. keepAlive, if not nil, is called while a request is in flight
// so the delivery is not handed to another worker.
//
// An error means the step stopped part way (the store was unreachable, the
// context ended, a hook played a crash): the caller must not acknowledge;
// whatever was written is in the log and the next delivery resumes from it.
func (e *Engine) Step(ctx context.Context, jobID string, keepAlive func()) (aggregate.Next, error) {
	next, _, err := e.step(ctx, jobID, known{}, keepAlive)
	return next, err
}

// known is a job's state and version as of the caller's last write, so the
// next round need not load it again; ok is false when they are not known.
type known struct {
	s   aggregate.State
	ver uint64
	ok  bool
	// pending are a new job's first events, decided and applied to s but
	// not stored yet: stored with the job's first claim, or alone.
	pending []events.Event
}

// after is the state once evs, just appended at version ver, are applied.
func after(s aggregate.State, ver uint64, evs []events.Event) known {
	for _, ev := range evs {
		s = aggregate.Apply(s, ev)
	}
	return known{s: s, ver: ver, ok: true}
}

func (e *Engine) step(ctx context.Context, jobID string, k known, keepAlive func()) (next aggregate.Next, throttled bool, err error) {
	for round := 0; round < maxRounds; round++ {
		if !k.ok {
			evs, ver, err := e.cfg.Store.Load(ctx, jobID)
			if err != nil {
				return aggregate.Next{}, false, fmt.Errorf("load job %s: %w", jobID, err)
			}
			k = known{s: aggregate.Fold(evs), ver: ver, ok: true}
		}
		s, ver, pending := k.s, k.ver, k.pending
		if !s.Exists() {
			return aggregate.Next{Step: aggregate.StepDone}, false, fmt.Errorf("%w: %s", ErrNoSuchJob, jobID)
		}
		now := e.cfg.Now()
		next = s.Next(now)
		if len(pending) > 0 && next.Step != aggregate.StepSend {
			if k, err = e.storeNew(ctx, s, pending); err != nil {
				return aggregate.Next{}, false, err
			}
			continue
		}
		switch next.Step {
		case aggregate.StepDone, aggregate.StepWait:
			return next, false, nil
		case aggregate.StepReconcile:
			if k, err = e.reconcile(ctx, s, ver); err != nil {
				if ctx.Err() != nil || errors.Is(err, ErrCrash) {
					return aggregate.Next{}, false, err
				}
				var ns *aggregate.NotSettledError
				if errors.As(err, &ns) {
					return aggregate.Next{Step: aggregate.StepWait, At: ns.Until}, false, nil
				}
				var le *serper.LedgerError
				retry := e.cfg.ReconcileRetry
				if errors.As(err, &le) && le.RetryAfter > retry {
					retry = le.RetryAfter
				}
				e.jobLog(jobID, s).Warn("billing ledger look-up failed; trying again later", "err", err, "retry_in", retry)
				return aggregate.Next{Step: aggregate.StepWait, At: now.Add(retry)}, false, nil
			}
		case aggregate.StepSend:
			if k, err = e.send(ctx, s, ver, pending, keepAlive); err != nil {
				if errors.Is(err, errJobExists) {
					k = known{} // the same command came twice: go on from the log
					continue
				}
				var te *ThrottledError
				if errors.As(err, &te) {
					return aggregate.Next{Step: aggregate.StepWait, At: now.Add(e.throttledFor(s, te))}, true, nil
				}
				return aggregate.Next{}, false, err
			}
		}
	}
	return aggregate.Next{}, false, fmt.Errorf("job %s: no progress after %d rounds", jobID, maxRounds)
}

// storeNew stores a new job's first events alone.
func (e *Engine) storeNew(ctx context.Context, s aggregate.State, pending []events.Event) (known, error) {
	v, err := e.cfg.Store.Append(ctx, s.JobID, 0, pending...)
	if errors.Is(err, store.ErrConcurrency) {
		return known{}, nil // the same command came twice: go on from the log
	}
	if err != nil {
		return known{}, fmt.Errorf("schedule job %s: %w", s.JobID, err)
	}
	if err := e.hook(e.cfg.Hooks.AfterSchedule, s.JobID); err != nil {
		return known{}, err
	}
	return known{s: s, ver: v, ok: true}, nil
}

// errJobExists: a new job's first events, stored with its claim, found
// the job there already (the same command came twice).
var errJobExists = errors.New("worker: the job exists")

// send claims the job, sends its key and records the outcome. A lost race
// for the claim is not an error: the next round reloads.
//
// prefix are a new job's first events, decided but not stored: they go in
// the same write as the claim, which saves a write per job (the key is
// still stored before its request leaves: the request waits for the
// write). If the job may not be claimed now, they are stored alone.
func (e *Engine) send(ctx context.Context, s aggregate.State, ver uint64, prefix []events.Event, keepAlive func()) (k known, err error) {
	jobID := s.JobID
	storePrefix := func() (known, error) {
		if len(prefix) == 0 {
			return known{}, nil
		}
		return e.storeNew(ctx, s, prefix)
	}
	api, err := e.api(s.Account)
	if err != nil {
		return known{}, fmt.Errorf("job %s: %w", jobID, err)
	}
	// The account's limits first: a job that may not start a search now
	// waits without writing anything. A resend of a key that was sent
	// before cannot buy, so the budget does not hold it back.
	var permit *Permit
	if e.cfg.Limiter != nil {
		cur, _ := s.Current()
		req := Request{Account: s.Account, JobID: jobID, Resend: cur.Sent(), High: e.urgent(s), Pages: accounts.PagesFor(s.Search.Limit)}
		if permit, err = e.cfg.Limiter.Acquire(ctx, req); err != nil {
			if k, perr := storePrefix(); perr != nil {
				return k, perr
			}
			return known{}, err
		}
	}
	sentOut := false
	defer func() {
		if !sentOut {
			permit.Unused(context.WithoutCancel(ctx))
		}
	}()
	evs, err := e.decider.Decide(s, aggregate.Due{Worker: e.cfg.Name}, e.cfg.Now(), e.cfg.IDs)
	switch {
	case errors.Is(err, aggregate.ErrNotDue), errors.Is(err, aggregate.ErrLeased), errors.Is(err, aggregate.ErrMustReconcile):
		return storePrefix() // the clock moved between Next and Decide; reload
	case err != nil:
		return known{}, fmt.Errorf("job %s: decide claim: %w", jobID, err)
	}
	ver, err = e.cfg.Store.Append(ctx, jobID, ver, append(slices.Clip(prefix), evs...)...)
	if errors.Is(err, store.ErrConcurrency) {
		if len(prefix) > 0 {
			return known{}, errJobExists
		}
		return known{}, nil // another worker got there first
	}
	if err != nil {
		return known{}, fmt.Errorf("job %s: append claim: %w", jobID, err)
	}
	k = after(s, ver, evs)
	s = k.s
	sent, ok := evs[0].Data.(events.Sent)
	if !ok {
		return k, nil // the key's deadline passed: reconciliation, or the job failed its budget
	}
	log := e.jobLog(jobID, s)
	if err := e.hook(e.cfg.Hooks.AfterClaim, jobID); err != nil {
		return known{}, err
	}
	// Last check before the request leaves: a pause since the claim must
	// not let a key out past its deadline or after the lease ran out.
	if now := e.cfg.Now(); !now.Before(sent.LeaseUntil) || !now.Before(sent.Deadline) {
		log.Warn("claim expired before the request left; not sending", "lease_until", sent.LeaseUntil, "deadline", sent.Deadline)
		return known{}, nil
	}
	if aggregate.BodyHash(s.Body) != s.BodySHA256 {
		return known{}, fmt.Errorf("job %s: stored body does not match its hash; refusing to send", jobID)
	}
	sentOut = true
	res := e.search(ctx, api, sent, s.Body, keepAlive)
	if e.cfg.Observer != nil {
		e.cfg.Observer.Searched(s.Account, res)
	}
	out := outcomeOf(sent.Key, sent.Try, res)
	if e.cfg.Limiter != nil {
		if res.RetryAfter > 0 {
			// The API asks the whole account to slow down, not one job.
			until := e.cfg.Now().Add(min(res.RetryAfter, s.Policy.RetryAfterMax.D()))
			e.cfg.Limiter.Pause(context.WithoutCancel(ctx), s.Account, until, fmt.Sprintf("HTTP %d %s", res.Status, res.Code))
		}
		class := e.decider.Table.Classify(out.Status, out.Code).Class
		billed := class == aggregate.ClassSuccess && out.Pages > 0
		definite := class.Definite() && class != aggregate.ClassReplayUnavailable
		defer permit.Done(context.WithoutCancel(ctx), billed, definite, out.Pages)
	}
	level := slog.LevelInfo
	if res.OK() && !res.Replayed {
		level = slog.LevelDebug // the common case; everything else is worth a line
	}
	log.Log(ctx, level, "sent", "try", sent.Try, "attempt", sent.Attempt, "result", res)
	if err := e.hook(e.cfg.Hooks.AfterSearch, jobID); err != nil {
		return known{}, err
	}
	return e.record(ctx, s, ver, out)
}

// throttledFor is how long a job held back by its account waits: a
// high-priority job, a resend (it settles a key that may have bought) and
// a job kept waiting too long try again soon; others later.
func (e *Engine) throttledFor(s aggregate.State, te *ThrottledError) time.Duration {
	waited := e.cfg.Limiter.WaitedFor(s.Account, s.JobID)
	return accounts.Retry(e.urgent(s), waited, e.cfg.StarveAfter, te.For, aggregate.Jitter(s.JobID, int(e.cfg.Now().UnixNano()&0xffff)))
}

// urgent reports whether a job goes before others when its account is
// limited: a high-priority job, a resend (it settles a key that may have
// bought), or a job its account has held back longer than StarveAfter.
func (e *Engine) urgent(s aggregate.State) bool {
	cur, _ := s.Current()
	return s.Priority == aggregate.PriorityHigh || cur.Sent() || e.cfg.Limiter.WaitedFor(s.Account, s.JobID) > e.cfg.StarveAfter
}

// search calls the API, keeping the delivery alive while it runs.
func (e *Engine) search(ctx context.Context, api API, sent events.Sent, body string, keepAlive func()) serper.Result {
	if keepAlive == nil {
		return api.Search(ctx, sent.Key, []byte(body))
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(keepAliveEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				keepAlive()
			}
		}
	}()
	return api.Search(ctx, sent.Key, []byte(body))
}

// keepAliveEvery is how often a delivery is kept alive during a request.
var keepAliveEvery = 5 * time.Second

// record appends what a send learned. The outcome is a fact: if the job
// moved on meanwhile, it is decided again on the new state; if the store is
// unreachable, it is retried until the context ends (then the key is
// resent by the next worker and the API replays the same outcome).
func (e *Engine) record(ctx context.Context, s aggregate.State, ver uint64, out aggregate.Outcome) (known, error) {
	jobID := s.JobID
	for {
		evs, err := e.decider.Decide(s, out, e.cfg.Now(), e.cfg.IDs)
		if errors.Is(err, aggregate.ErrStaleOutcome) || errors.Is(err, aggregate.ErrTerminal) {
			e.jobLog(jobID, s).Info("outcome no longer decides anything", "reason", err)
			return known{}, nil
		}
		if err != nil {
			return known{}, fmt.Errorf("job %s: decide outcome: %w", jobID, err)
		}
		newVer, err := e.cfg.Store.Append(ctx, jobID, ver, evs...)
		if err == nil {
			return after(s, newVer, evs), e.hook(e.cfg.Hooks.AfterRecord, jobID)
		}
		if !errors.Is(err, store.ErrConcurrency) {
			if ctx.Err() != nil {
				return known{}, fmt.Errorf("job %s: outcome not recorded: %w", jobID, err)
			}
			e.jobLog(jobID, s).Warn("recording the outcome failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return known{}, fmt.Errorf("job %s: outcome not recorded: %w", jobID, ctx.Err())
			case <-time.After(e.cfg.StoreRetry):
			}
		}
		var loaded []events.Event
		if loaded, ver, err = e.cfg.Store.Load(ctx, jobID); err != nil {
			if ctx.Err() != nil {
				return known{}, fmt.Errorf("job %s: outcome not recorded: %w", jobID, err)
			}
			continue
		}
		s = aggregate.Fold(loaded)
	}
}

// reconcile asks the billing ledger about every key the job sent and
// records the verdict.
func (e *Engine) reconcile(ctx context.Context, s aggregate.State, ver uint64) (known, error) {
	q := s.ReconcileQuery()
	var entries []serper.LedgerEntry
	if len(q.Keys)+len(q.RequestIDs) > 0 {
		api, err := e.api(s.Account)
		if err != nil {
			return known{}, fmt.Errorf("job %s: %w", s.JobID, err)
		}
		if entries, err = api.Ledger(ctx, serper.LedgerQuery{Keys: q.Keys, RequestIDs: q.RequestIDs}); err != nil {
			return known{}, err
		}
	}
	evs, err := e.decider.Decide(s, answerOf(q, entries), e.cfg.Now(), e.cfg.IDs)
	if err != nil {
		return known{}, fmt.Errorf("job %s: decide reconciliation: %w", s.JobID, err)
	}
	ver, err = e.cfg.Store.Append(ctx, s.JobID, ver, evs...)
	if errors.Is(err, store.ErrConcurrency) {
		return known{}, nil
	}
	if err != nil {
		return known{}, fmt.Errorf("job %s: append reconciliation: %w", s.JobID, err)
	}
	rec := evs[0].Data.(events.Reconciled)
	e.jobLog(s.JobID, s).Info("reconciled", "verdict", rec.Verdict, "charges", rec.Charges, "keys", len(q.Keys))
	if rec.Verdict == aggregate.VerdictNotCharged && e.cfg.Limiter != nil {
		// The key's first send was counted against the day's budget in
		// case it bought; it did not.
		e.cfg.Limiter.Refund(context.WithoutCancel(ctx), s.Account, accounts.PagesFor(s.Search.Limit))
	}
	return after(s, ver, evs), e.hook(e.cfg.Hooks.AfterRecord, s.JobID)
}
