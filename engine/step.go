package engine

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
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/serper"
)

// maxRounds bounds how often one Step reloads a job. Each round either
// makes progress or learns that another writer did, so a handful suffice.
const maxRounds = 16

// ErrNoSuchJob is returned by Step for a wake-up of a job with no events.
var ErrNoSuchJob = errors.New("engine: no such job")

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
	return known{s: aggregate.ApplyAll(s, evs), ver: ver, ok: true}
}

func (e *Engine) step(ctx context.Context, jobID string, k known, keepAlive func()) (next aggregate.Next, throttle *ThrottledError, err error) {
	defer func() {
		if e.cfg.Limiter != nil && throttle == nil && k.ok {
			// Done, sent, or waiting for something else: no longer held
			// back by its account, here at least.
			e.cfg.Limiter.notWaiting(accountKey(k.s.Account), jobID)
		}
	}()
	loaded := false // k was read from the log in this round, not written by it
	for round := 0; round < maxRounds; round++ {
		if loaded = !k.ok; loaded {
			evs, ver, err := e.cfg.Store.Load(ctx, jobID)
			if err != nil {
				return aggregate.Next{}, nil, fmt.Errorf("load job %s: %w", jobID, err)
			}
			k = known{s: aggregate.Fold(evs), ver: ver, ok: true}
		}
		s, ver, pending := k.s, k.ver, k.pending
		now := e.cfg.Now()
		next = s.Next(now)
		if loaded && (!s.Exists() || next.Step == aggregate.StepDone) {
			// About to drop the delivery: make sure the load was not
			// answered by a replica behind the log.
			if err := e.confirmLoad(ctx, jobID, ver); err != nil {
				return aggregate.Next{}, nil, err
			}
		}
		if !s.Exists() {
			return aggregate.Next{Step: aggregate.StepDone}, nil, fmt.Errorf("%w: %s", ErrNoSuchJob, jobID)
		}
		if len(pending) > 0 && next.Step != aggregate.StepSend {
			if k, err = e.storeNew(ctx, s, pending); err != nil {
				return aggregate.Next{}, nil, err
			}
			continue
		}
		switch next.Step {
		case aggregate.StepDone, aggregate.StepWait:
			return next, nil, nil
		case aggregate.StepReconcile:
			if k, err = e.reconcile(ctx, s, ver); err != nil {
				if ctx.Err() != nil || errors.Is(err, ErrCrash) {
					return aggregate.Next{}, nil, err
				}
				var ns *aggregate.NotSettledError
				if errors.As(err, &ns) {
					return aggregate.Next{Step: aggregate.StepWait, At: ns.Until}, nil, nil
				}
				var le *serper.LedgerError
				retry := e.cfg.ReconcileRetry
				if errors.As(err, &le) && le.RetryAfter > retry {
					retry = le.RetryAfter
				}
				if errors.Is(err, ErrUnknownAccount) {
					// Its charges are in its account's ledger alone: another
					// account's could show none, and a new key buy again.
					e.jobLog(jobID, s).Error("the job's API account is not configured here, and only its ledger can settle the job; waiting for it (list the account in --accounts)",
						"err", err, "retry_in", retry)
				} else {
					e.jobLog(jobID, s).Warn("reconciliation failed; trying again later", "err", err, "retry_in", retry)
				}
				return aggregate.Next{Step: aggregate.StepWait, At: now.Add(retry)}, nil, nil
			}
		case aggregate.StepSend:
			if k, err = e.send(ctx, s, ver, pending, keepAlive); err != nil {
				if errors.Is(err, errJobExists) {
					k = known{} // the same command came twice: go on from the log
					continue
				}
				var te *ThrottledError
				if errors.As(err, &te) {
					return aggregate.Next{Step: aggregate.StepWait, At: now.Add(e.throttledFor(s, te))}, te, nil
				}
				if errors.Is(err, ErrUnknownAccount) {
					e.jobLog(jobID, s).Error("the job's API account is not configured here; waiting for it (a job not sent yet fails at its age budget)",
						"err", err, "retry_in", unknownAccountRetry)
					return aggregate.Next{Step: aggregate.StepWait, At: now.Add(unknownAccountRetry)}, nil, nil
				}
				return aggregate.Next{}, nil, err
			}
		}
	}
	return aggregate.Next{}, nil, fmt.Errorf("job %s: no progress after %d rounds", jobID, maxRounds)
}

// errStaleLoad: a job was loaded from a replica behind the log's leader.
var errStaleLoad = errors.New("engine: the job was loaded from a replica behind the log")

// confirmLoad checks a loaded version against the log's leader before a
// delivery is dropped on its word (a job missing, or finished). On a
// cluster any replica answers the direct gets a job is loaded with; one
// behind would have a wake-up dropped (until the sweep) for a job just
// scheduled or re-purchased. A stale load is an error: the delivery comes
// again after a short delay.
func (e *Engine) confirmLoad(ctx context.Context, jobID string, ver uint64) error {
	leader, err := eventstore.LeaderVersion(ctx, e.cfg.Store, jobID)
	if err != nil {
		return fmt.Errorf("job %s: confirm its version with the leader: %w", jobID, err)
	}
	if leader != ver {
		return fmt.Errorf("%w: job %s loaded at version %d, the leader has %d", errStaleLoad, jobID, ver, leader)
	}
	return nil
}

// storeNew stores a new job's first events alone.
func (e *Engine) storeNew(ctx context.Context, s aggregate.State, pending []events.Event) (known, error) {
	v, err := e.cfg.Store.Append(expiring(ctx, s), s.JobID, 0, pending...)
	if errors.Is(err, eventstore.ErrConcurrency) {
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
var errJobExists = errors.New("engine: the job exists")

// wouldClaim reports whether the job's due step, decided now, claims it
// (or cannot be told yet): only a claim needs its account's permit. A job
// past its age budget, or a key past its deadline, is settled without
// one, so that an account's spent budget does not hold its end back.
func (e *Engine) wouldClaim(s aggregate.State) bool {
	evs, err := e.decider.Decide(s, aggregate.Due{Worker: e.cfg.Name}, e.cfg.Now(), e.cfg.IDs)
	if err != nil || len(evs) == 0 {
		return true
	}
	_, claim := evs[0].Data.(events.Sent)
	return claim
}

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
	// The account's limits first: a job that may not start a search now
	// waits without writing anything. A resend of a key that was sent
	// before cannot buy, so the budget does not hold it back.
	var permit *Permit
	if e.cfg.Limiter != nil && e.wouldClaim(s) {
		cur, _ := s.Current()
		req := Request{Account: s.Account, JobID: jobID, Resend: cur.Sent(), High: e.urgent(s), Pages: accounts.PagesFor(s.Search.Limit),
			Lease: s.Policy.Lease.D(), FirstSend: cur.FirstSend}
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
	keepReservation := func() {
		sentOut = true
		permit.Done(context.WithoutCancel(ctx), false, false, 0) // the slot back, the reservation kept
	}
	evs, err := e.decider.Decide(s, aggregate.Due{Worker: e.cfg.Name}, e.cfg.Now(), e.cfg.IDs)
	switch {
	case errors.Is(err, aggregate.ErrNotDue), errors.Is(err, aggregate.ErrLeased), errors.Is(err, aggregate.ErrMustReconcile):
		return storePrefix() // the clock moved between Next and Decide; reload
	case err != nil:
		return known{}, fmt.Errorf("job %s: decide claim: %w", jobID, err)
	}
	// A claim needs the job's API account; a key past its deadline or a
	// job past its age budget is settled without it.
	var api API
	if _, claim := evs[0].Data.(events.Sent); claim {
		if e.cfg.Limiter != nil && permit == nil {
			return storePrefix() // not a claim a moment ago; the next round asks for a permit
		}
		if api, err = e.api(s.Account); err != nil {
			if k, perr := storePrefix(); perr != nil {
				return k, perr
			}
			return known{}, fmt.Errorf("job %s: %w", jobID, err)
		}
	}
	ver, err = e.cfg.Store.Append(expiring(ctx, s), jobID, ver, append(slices.Clip(prefix), evs...)...)
	if errors.Is(err, eventstore.ErrConcurrency) {
		if len(prefix) > 0 {
			return known{}, errJobExists
		}
		return known{}, nil // another worker got there first
	}
	if err != nil {
		if errors.Is(err, eventstore.ErrUnknownOutcome) {
			keepReservation() // the claim may be in the log
		}
		return known{}, fmt.Errorf("job %s: append claim: %w", jobID, err)
	}
	k = after(s, ver, evs)
	s = k.s
	sent, ok := evs[0].Data.(events.Sent)
	if !ok {
		return k, nil // the key's deadline passed: reconciliation, or the job failed its budget
	}
	if cur, ok := s.Current(); ok {
		// Its pages count on its key's first-send day, which settling
		// and refunds use; the reservation may have been a day before.
		permit.OnDay(context.WithoutCancel(ctx), cur.FirstSend)
	}
	log := e.jobLog(jobID, s)
	if err := e.hook(e.cfg.Hooks.AfterClaim, jobID); err != nil {
		return known{}, err
	}
	// Last check before the request leaves: a pause since the claim must
	// not let a key out past its deadline, nor so late that its search
	// could still run when the lease ends (see sendBy).
	if now, by := e.cfg.Now(), sendBy(api, sent, s.Policy.Lease.D()); !now.Before(by) || !now.Before(sent.Deadline) {
		log.Warn("claim too old for the request to leave; not sending", "send_by", by, "lease_until", sent.LeaseUntil, "deadline", sent.Deadline)
		// The claim is in the log: the key's next send counts as a
		// resend, which the budget does not hold back, so the page
		// reserved for it stays reserved (as after a crash here).
		keepReservation()
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
		rule := e.decider.Table.Decision(out.Status, out.Code, sent.Try, out.Replayed)
		billed := rule.Class == aggregate.ClassSuccess && out.Pages > 0
		switch searchState(rule.Class, aggregate.SpeaksForKey(sent.Try, out.Replayed), res.Unknown) {
		case searchEnded:
			permit.SearchOver() // the key's search has ended, an earlier send's too
		case searchMayRun:
			permit.MayStillRun() // its slot stays taken while the search may run
		}
		defer permit.Done(context.WithoutCancel(ctx), billed, rule.Settles(), out.Pages)
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

// sendBy is the last moment a claimed request may leave. The billing ledger
// is trusted to show every charge of a job once its last claim's lease has
// run out (aggregate.State.Settled), so the search a request starts must
// be over by then: a client that waits at most T for a search must send by
// the end of the lease less T. A slow claim append or a pause between the
// claim and the request could otherwise let a search run past the lease,
// and a reconciliation that finds no charge yet would buy again. An API
// that does not say how long it waits, or waits longer than the lease
// (test set-ups), is held to the lease alone.
func sendBy(api API, sent events.Sent, lease time.Duration) time.Time {
	if t, ok := api.(interface{ Timeout() time.Duration }); ok && t.Timeout() > 0 && t.Timeout() < lease {
		return sent.LeaseUntil.Add(-t.Timeout())
	}
	return sent.LeaseUntil
}

// throttledFor is how long a job held back by its account waits: a
// high-priority job, a resend (it settles a key that may have bought) and
// a job kept waiting too long try again soon; others later.
func (e *Engine) throttledFor(s aggregate.State, te *ThrottledError) time.Duration {
	waited := e.cfg.Limiter.WaitedFor(s.Account, s.JobID)
	return accounts.Retry(e.urgent(s), waited, e.cfg.StarveAfter, te.For, te.Spread, aggregate.Jitter(s.JobID, int(e.cfg.Now().UnixNano()&0xffff)))
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

// unknownAccountRetry is how long a job whose API account this engine
// does not have (it was removed from the configuration, or another engine
// took the job in) waits before it is tried again.
const unknownAccountRetry = time.Minute

// keepAliveEvery is how often a delivery is kept alive during a request.
var keepAliveEvery = 5 * time.Second

// record appends what a send learned. The outcome is a fact: if the job
// moved on meanwhile, it is decided again on the new state; if the store is
// unreachable, it is retried every StoreRetry until the context ends (then
// the key is resent by the next worker and the API replays the same
// outcome). A result too large for the log is recorded as an unknown
// outcome (serper.UnknownOversizedBody), as if the client had refused the
// reply: the key is resent while it may be and then reconciled, so the job
// ends charged_no_result rather than waiting forever. Other refusals that
// no retry can change are returned.
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
		newVer, err := e.cfg.Store.Append(expiring(ctx, s), jobID, ver, evs...)
		switch {
		case err == nil:
			return after(s, newVer, evs), e.hook(e.cfg.Hooks.AfterRecord, jobID)
		case errors.Is(err, eventstore.ErrConcurrency):
			// reload and decide again, at once
		case errors.Is(err, eventstore.ErrTooLarge) && out.Result != nil:
			e.jobLog(jobID, s).Error("the search result is too large for the event log; recording the outcome as unknown",
				"request_id", out.RequestID, "result_bytes", len(out.Result), "err", err)
			out = aggregate.Outcome{Key: out.Key, Try: out.Try, RetryAfter: out.RetryAfter, Unknown: serper.UnknownOversizedBody}
			continue
		case permanent(err):
			return known{}, fmt.Errorf("job %s: outcome not recorded: %w", jobID, err)
		default:
			if err := e.storeWait(ctx, s, "recording the outcome failed; retrying", err); err != nil {
				return known{}, fmt.Errorf("job %s: outcome not recorded: %w", jobID, err)
			}
		}
		loaded, v, err := e.cfg.Store.Load(ctx, jobID)
		if err != nil {
			if permanent(err) {
				return known{}, fmt.Errorf("job %s: outcome not recorded: %w", jobID, err)
			}
			if err := e.storeWait(ctx, s, "reloading the job failed; retrying", err); err != nil {
				return known{}, fmt.Errorf("job %s: outcome not recorded: %w", jobID, err)
			}
			continue // with the version we had
		}
		s, ver = aggregate.Fold(loaded), v
	}
}

// permanent reports a store refusal no retry can change.
func permanent(err error) bool {
	var corrupt *eventstore.CorruptError
	return errors.Is(err, eventstore.ErrTooLarge) || errors.Is(err, eventstore.ErrInvalid) || errors.Is(err, eventstore.ErrDuplicate) ||
		errors.As(err, &corrupt)
}

// storeWait logs a failed store call and waits StoreRetry, or returns the
// context's error (wrapping the failure) if it ends first.
func (e *Engine) storeWait(ctx context.Context, s aggregate.State, msg string, err error) error {
	if ctx.Err() != nil {
		return errors.Join(err, ctx.Err())
	}
	e.jobLog(s.JobID, s).Warn(msg, "err", err)
	t := time.NewTimer(e.cfg.StoreRetry)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errors.Join(err, ctx.Err())
	case <-t.C:
		return nil
	}
}

// reconcile asks the billing ledger about every key the job sent and
// records the verdict, or, for a stored result the log cannot prove was
// its key's only execution, about that key, and records what it found.
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
	ver, err = e.cfg.Store.Append(expiring(ctx, s), s.JobID, ver, evs...)
	if errors.Is(err, eventstore.ErrConcurrency) {
		return known{}, nil
	}
	if errors.Is(err, eventstore.ErrUnknownOutcome) && ctx.Err() == nil {
		// It may have landed: read the job again and go on from the log,
		// rather than wait as after a failed ledger look-up. A verdict
		// of not charged that did land keeps its page counted (the
		// budget errs on the side of spending less).
		e.jobLog(s.JobID, s).Warn("the reconciliation's write went unanswered; reading the job again", "err", err)
		return known{}, nil
	}
	if err != nil {
		return known{}, fmt.Errorf("job %s: append reconciliation: %w", s.JobID, err)
	}
	if c, ok := evs[0].Data.(events.ChargesChecked); ok {
		log := e.jobLog(s.JobID, s)
		if c.Verdict == aggregate.VerdictDoubleCharge {
			log.Error("the API charged the stored key more than once (its own double purchase); recorded in the job's log",
				"key", c.Key, "charges", c.Charges)
		} else {
			log.Info("charges checked", "verdict", c.Verdict, "charges", c.Charges)
		}
		return after(s, ver, evs), e.hook(e.cfg.Hooks.AfterRecord, s.JobID)
	}
	rec, ok := evs[0].Data.(events.Reconciled)
	if !ok {
		// No verdict: the API said the key was billed, and the ledger
		// never showed the charge within the job's age budget, so the
		// job failed (charge_not_in_ledger). Its page stays counted.
		e.jobLog(s.JobID, s).Warn("reconciliation ended the job without a verdict", "event", evs[0].Type(), "keys", len(q.Keys))
		return after(s, ver, evs), e.hook(e.cfg.Hooks.AfterRecord, s.JobID)
	}
	e.jobLog(s.JobID, s).Info("reconciled", "verdict", rec.Verdict, "charges", rec.Charges, "keys", len(q.Keys))
	if cur, ok := s.Current(); ok && rec.Verdict == aggregate.VerdictNotCharged && e.cfg.Limiter != nil {
		// The key's first send was counted against its day's budget in
		// case it bought; it did not. That day, not today: a key sent
		// late in a day is reconciled in the next.
		e.cfg.Limiter.Refund(context.WithoutCancel(ctx), s.Account, accounts.PagesFor(s.Search.Limit), cur.FirstSend)
	}
	return after(s, ver, evs), e.hook(e.cfg.Hooks.AfterRecord, s.JobID)
}

// What an answer says of its key's search, for the account's slots.
const (
	searchUnsaid = iota // nothing: this send did not run (a 429, a refusal)
	searchMayRun        // it may still be running at the API
	searchEnded         // it has ended, whichever send started it
)

// searchState reads an answer's class for what it says of the key's
// search. speaks: the answer is the key's own (see
// aggregate.SpeaksForKey); a resend's own error leaves an earlier send's
// search where it was, perhaps still running. unknown says why an
// outcome is unknown.
func searchState(c aggregate.Class, speaks bool, unknown string) int {
	switch {
	case c == aggregate.ClassSuccess, c == aggregate.ClassReplayUnavailable:
		return searchEnded
	case c == aggregate.ClassRetryable && speaks:
		return searchEnded
	case c.Definite() && !speaks:
		return searchMayRun
	case !c.Definite() && unknown != serper.UnknownNotSent:
		return searchMayRun
	}
	return searchUnsaid
}
