package aggregate

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/serpent-engine/serpent/events"
)

// IDs makes the new ids a decision needs. The engine gives ULIDs and random
// UUIDs; tests give predictable ones.
type IDs interface {
	// EventID returns a new ULID for an event.
	EventID() string
	// AttemptKey returns a new Idempotency-Key (a UUID).
	AttemptKey() string
}

// Decider decides with an outcome table.
type Decider struct {
	Table Table
}

var defaultDecider = Decider{Table: DefaultTable()}

// Decide decides with the default outcome table.
func Decide(s State, in Input, now time.Time, ids IDs) ([]events.Event, error) {
	return defaultDecider.Decide(s, in, now, ids)
}

// Decide returns the events that follow from one input at time now, in the
// order they must be appended (together, in one write), or an error saying
// why nothing may happen now.
func (d Decider) Decide(s State, in Input, now time.Time, ids IDs) ([]events.Event, error) {
	b := &emitter{s: s, now: now, ids: ids}
	var err error
	switch in := in.(type) {
	case Schedule:
		err = b.schedule(in)
	case Due:
		err = b.due(in)
	case Outcome:
		err = b.outcome(d.Table, in)
	case LedgerAnswer:
		err = b.ledger(in)
	case Cancel:
		err = b.cancel(in)
	case AuthorizeRepurchase:
		err = b.repurchase(in)
	default:
		err = invalid("unknown input %T", in)
	}
	if err != nil {
		return nil, err
	}
	return b.out, nil
}

// emitter collects the events of one decision with their envelopes.
type emitter struct {
	s   State
	now time.Time
	ids IDs
	out []events.Event
}

func (b *emitter) add(p events.Payload) {
	b.out = append(b.out, events.Event{
		ID:      b.ids.EventID(),
		JobID:   b.s.JobID,
		Version: b.s.Version + uint64(len(b.out)) + 1,
		Time:    b.now,
		Data:    p,
	})
}

// live checks that the job exists and is not finished.
func (b *emitter) live() error {
	switch {
	case !b.s.Exists():
		return ErrNoJob
	case b.s.Status.Terminal():
		return ErrTerminal
	}
	return nil
}

func (b *emitter) schedule(in Schedule) error {
	if b.s.Exists() {
		return ErrExists
	}
	if err := events.ValidateJobID(in.JobID); err != nil {
		return invalid("%v", err)
	}
	if in.Body == "" || in.Slot.IsZero() {
		return invalid("a schedule needs a body and a slot")
	}
	if err := ValidatePolicy(in.Policy); err != nil {
		return invalid("%v", err)
	}
	b.s.JobID = in.JobID
	sum := BodyHash(in.Body)
	notBefore := in.NotBefore
	if notBefore.IsZero() {
		notBefore = in.Slot
	}
	b.add(events.JobScheduled{
		Slot: in.Slot.UTC(), Search: in.Search, Body: in.Body, BodySHA256: sum,
		Policy: in.Policy, NotBefore: notBefore.UTC(),
		Account: in.Account, Priority: in.Priority, Source: in.Source,
	})
	b.add(events.AttemptCreated{Attempt: 1, Key: b.ids.AttemptKey(), BodySHA256: sum})
	return nil
}

func (b *emitter) due(in Due) error {
	if err := b.live(); err != nil {
		return err
	}
	if in.Worker == "" {
		return invalid("a due job needs the worker's name")
	}
	s, now := b.s, b.now
	switch s.Status {
	case StatusReconciling:
		return ErrMustReconcile
	case StatusSending:
		if now.Before(s.Lease.Until) {
			return &LeasedError{Worker: s.Lease.Worker, Until: s.Lease.Until}
		}
	default:
		if now.Before(s.NextRunAt) {
			return &NotDueError{Until: s.NextRunAt}
		}
	}
	cur, ok := s.Current()
	if !ok {
		return invalid("job %s has no attempt key", s.JobID)
	}
	if cur.Unresolved() && !now.Before(cur.Deadline) {
		b.add(events.DeadlineReached{Key: cur.Key, Deadline: cur.Deadline, Reason: ReasonReplayDeadline})
		return nil
	}
	if age := AgeDeadline(s.Policy, s.AgeStart()); !now.Before(age) {
		if cur.Unresolved() {
			b.add(events.DeadlineReached{Key: cur.Key, Deadline: age, Reason: ReasonAgeBudget})
		} else {
			b.add(events.JobFailed{Reason: ReasonAgeBudget, Key: cur.Key,
				Message: fmt.Sprintf("no result within the job's age budget of %s", s.Policy.MaxAge.D())})
		}
		return nil
	}
	deadline := cur.Deadline
	if !cur.Sent() {
		deadline = KeyDeadline(s.Policy, now)
	}
	b.add(events.Sent{
		Key: cur.Key, Attempt: cur.Number, Try: cur.Tries + 1, Worker: in.Worker,
		LeaseUntil: now.Add(s.Policy.Lease.D()), Deadline: deadline,
	})
	return nil
}

func (b *emitter) outcome(t Table, in Outcome) error {
	if err := b.live(); err != nil {
		return err
	}
	s, now := b.s, b.now
	cur, _ := s.Current()
	// Only the latest send of the current key speaks for it. An older
	// send's answer may be about that one request only (a 429 ran
	// nothing, so a newer send of the key may have run and been billed),
	// or about an execution the provider has since forgotten (an unbilled
	// result whose cache expired, run again by a newer send).
	if in.Key != cur.Key || !cur.Sent() || cur.Definite || in.Try != cur.Tries {
		return ErrStaleOutcome
	}
	if o := s.LastOutcome; o != nil && o.Key == in.Key && o.Try == in.Try {
		// That send's answer is recorded already (a write whose reply was
		// lost, read back): a send has one answer, and the same again
		// decides nothing (a 429 on a resend would count twice).
		return ErrStaleOutcome
	}
	if in.Status == 200 && len(in.Result) == 0 {
		return invalid("a 200 without a decoded result is an unknown outcome, not a success")
	}
	rule := t.Decision(in.Status, in.Code, in.Try, in.Replayed)
	if !rule.Class.Definite() && s.Status != StatusSending {
		return ErrStaleOutcome
	}
	classified := events.OutcomeClassified{
		Key: in.Key, Try: in.Try, Status: in.Status, Code: in.Code, Unknown: in.Unknown,
		RequestID: in.RequestID, Replayed: in.Replayed, RetryAfter: events.Duration(in.RetryAfter),
		Class: string(rule.Class), Action: string(rule.Action), Attempt: cur.Number, Sends: s.Sends,
	}
	switch rule.Action {
	case ActionStore:
		b.add(events.ObservationStored{Key: in.Key, RequestID: in.RequestID, Replayed: in.Replayed,
			Pages: in.Pages, Result: in.Result, CheckCharges: Unproven(in.Try, in.Replayed)})
	case ActionFail:
		b.add(events.JobFailed{Reason: ReasonAPIError, Key: in.Key, Status: in.Status, Code: in.Code,
			Message: in.Message, RequestID: in.RequestID})
	case ActionReconcile:
		classified.NextRunAt = now
		b.add(classified)
	case ActionRetrySameKey:
		next := now.Add(Backoff(s.Policy, s.Retries, Jitter(s.JobID, s.Sends), in.RetryAfter))
		// Never plan a resend past the key's deadline: at the deadline the
		// job goes to reconciliation instead.
		next = earliest(next, cur.Deadline, AgeDeadline(s.Policy, s.AgeStart()))
		classified.NextRunAt = next
		b.add(classified)
	case ActionRetryNewKey:
		next := now.Add(Backoff(s.Policy, s.Retries, Jitter(s.JobID, s.Sends), in.RetryAfter))
		if reason := b.budgetLeft(next); reason != "" {
			classified.Action = string(ActionFail)
			b.add(classified)
			b.add(events.JobFailed{Reason: reason, Key: in.Key, Status: in.Status, Code: in.Code,
				Message: budgetMessage(reason, s.Policy), RequestID: in.RequestID})
			return nil
		}
		classified.NextRunAt = next
		b.add(classified)
		b.rotate(cur, rotateReason(in), next)
	}
	return nil
}

// budgetLeft returns "" if the job may mint another key to run at next, or
// the budget that is exhausted.
func (b *emitter) budgetLeft(next time.Time) string {
	s := b.s
	if len(s.Attempts) >= s.Policy.MaxKeys+s.Repurchases {
		return ReasonKeyBudget
	}
	if !next.Before(AgeDeadline(s.Policy, s.AgeStart())) {
		return ReasonAgeBudget
	}
	return ""
}

func (b *emitter) rotate(old Attempt, reason string, next time.Time) {
	b.add(events.KeyRotated{OldKey: old.Key, NewKey: b.ids.AttemptKey(), Attempt: old.Number + 1,
		BodySHA256: b.s.BodySHA256, Reason: reason, NextRunAt: next})
}

func (b *emitter) ledger(in LedgerAnswer) error {
	if b.s.CheckPending {
		return b.checkCharges(in)
	}
	if err := b.live(); err != nil {
		return err
	}
	s := b.s
	if s.Status != StatusReconciling {
		return ErrNotReconciling
	}
	if err := in.covers(s.ReconcileQuery()); err != nil {
		return err
	}
	q := s.ReconcileQuery()
	charges := s.charges(in.Entries)
	if settled := s.Settled(); len(charges) == 0 && b.now.Before(settled) {
		// A search the last send started may still be running, and is
		// billed only when it ends: no charge yet proves nothing.
		return &NotSettledError{Until: settled}
	}
	cur, _ := s.Current()
	if len(charges) == 0 && (s.Reconcile == string(ClassReplayUnavailable) || cur.BillingUnresolved) {
		// The API said the key's search ran and was billed (409
		// idempotency_replay_unavailable) or is being billed (503
		// billing_unavailable): the ledger, kept apart from the replies,
		// is behind. No charge yet proves nothing; a new key could buy
		// the observation twice. Ask again until the job's age budget
		// ends.
		if until := AgeDeadline(s.Policy, s.AgeStart()); b.now.Before(until) {
			return &NotSettledError{Until: earliest(b.now.Add(s.Policy.MaxDelay.D()), until)}
		}
		if s.Reconcile == string(ClassReplayUnavailable) {
			b.add(events.JobFailed{Reason: ReasonChargeNotInLedger, Key: cur.Key, Message: fmt.Sprintf(
				"the API said key %s was billed and its response is lost (409 idempotency_replay_unavailable), but the billing ledger showed no charge within the job's age budget of %s; not bought again",
				cur.Key, s.Policy.MaxAge.D())})
			return nil
		}
		// billing_unavailable past the age budget: no charge ever showed
		// (a search with nothing to bill); the job fails on its budget.
	}
	rec := events.Reconciled{Keys: q.Keys, RequestIDs: q.RequestIDs, Entries: charges, Charges: len(charges)}
	switch {
	case len(charges) > 0:
		rec.Verdict, rec.Action = VerdictCharged, string(StatusChargedNoResult)
		b.add(rec)
	case s.Reconcile == string(ClassFailure):
		// A resend was refused (see Table.Decision) and no send of the
		// job was charged: the refusal stands.
		rec.Verdict, rec.Action = VerdictNotCharged, string(ActionFail)
		b.add(rec)
		failed := events.JobFailed{Reason: ReasonAPIError, Key: cur.Key}
		if o := s.LastOutcome; o != nil {
			failed.Status, failed.Code, failed.RequestID = o.Status, o.Code, o.RequestID
			failed.Message = fmt.Sprintf("the API refused a resend of key %s (HTTP %d %s), and the billing ledger shows no charge of the job", cur.Key, o.Status, o.Code)
		}
		b.add(failed)
	default:
		rec.Verdict = VerdictNotCharged
		if reason := b.budgetLeft(b.now); reason != "" {
			rec.Action = string(ActionFail)
			b.add(rec)
			b.add(events.JobFailed{Reason: reason, Key: cur.Key, Message: budgetMessage(reason, s.Policy)})
			return nil
		}
		rec.Action = string(ActionRetryNewKey)
		b.add(rec)
		b.rotate(cur, ReasonNotCharged, b.now)
	}
	return nil
}

// covers checks that the answer looked up every key and request id of q.
func (in LedgerAnswer) covers(q ReconcileQuery) error {
	for _, k := range q.Keys {
		if !contains(in.Keys, k) {
			return invalid("the ledger answer does not cover key %s", k)
		}
	}
	for _, id := range q.RequestIDs {
		if !contains(in.RequestIDs, id) {
			return invalid("the ledger answer does not cover request id %s", id)
		}
	}
	return nil
}

// checkCharges records what the billing ledger holds for a stored key
// the log cannot prove bought once (ObservationStored.CheckCharges): one
// charge (or none) confirms the purchase, more are a double charge the
// API made under the key.
func (b *emitter) checkCharges(in LedgerAnswer) error {
	s := b.s
	if settled := s.Settled(); b.now.Before(settled) {
		return &NotSettledError{Until: settled}
	}
	q := s.ReconcileQuery()
	if err := in.covers(q); err != nil {
		return err
	}
	var charges []events.LedgerEntry
	for _, e := range s.charges(in.Entries) {
		if e.Key == q.Keys[0] || contains(q.RequestIDs, e.RequestID) {
			charges = append(charges, e)
		}
	}
	c := events.ChargesChecked{Key: s.Result.Key, RequestIDs: q.RequestIDs, Entries: charges, Charges: len(charges),
		Verdict: VerdictConfirmed}
	if len(charges) > 1 {
		c.Verdict = VerdictDoubleCharge
	}
	b.add(c)
	return nil
}

// Unproven reports whether a result accepted on a key's try-th send may
// not be the key's only execution. The first send starts the only one.
// A replay on the second send replays the first send's, the only one that
// could have run. Any other resend may have met an API that lost the
// key's record and ran it again, behind an answer that was lost.
func Unproven(try int, replayed bool) bool {
	return try > 2 || try == 2 && !replayed
}

// Settled is when the billing ledger can be trusted to show every charge
// of the job: once every search its sends may have started has ended. A
// search runs at most as long as the client waits, and the lease covers
// that wait with a margin, so it is the last send plus the lease.
func (s State) Settled() time.Time {
	var last time.Time
	for _, a := range s.Attempts {
		if a.LastSend.After(last) {
			last = a.LastSend
		}
	}
	if last.IsZero() {
		return last
	}
	return last.Add(s.Policy.Lease.D())
}

// ReconcileQuery is what to look up in the billing ledger: every key the
// job sent and every request id it saw.
type ReconcileQuery struct {
	Keys       []string
	RequestIDs []string
}

// ReconcileQuery returns the look-up a reconciliation of the job needs:
// every key it sent and every request id it saw; for a check of its
// stored key's charges, that key and its request ids.
func (s State) ReconcileQuery() ReconcileQuery {
	var q ReconcileQuery
	if s.CheckPending && s.Result != nil {
		if a := s.attempt(s.Result.Key); a != nil {
			return ReconcileQuery{Keys: []string{a.Key}, RequestIDs: slices.Clone(a.RequestIDs)}
		}
	}
	for _, a := range s.Attempts {
		if a.Sent() {
			q.Keys = append(q.Keys, a.Key)
		}
	}
	q.RequestIDs = s.RequestIDs()
	return q
}

// charges keeps the ledger entries that belong to this job and were not
// settled before, one per distinct request id: the reconciler's own retries
// and double look-ups never count a charge twice.
func (s State) charges(entries []events.LedgerEntry) []events.LedgerEntry {
	// Entries the job accounted for before (a charged_no_result before a
	// re-purchase) are left out: a charged verdict lists only new charges,
	// which is what lets every counter of purchases add them up.
	keys := map[string]bool{}
	for _, a := range s.Attempts {
		keys[a.Key] = true
	}
	ids := s.RequestIDs()
	var out []events.LedgerEntry
	seen := map[string]bool{}
	for _, e := range entries {
		if !keys[e.Key] && !contains(ids, e.RequestID) {
			continue
		}
		id := ChargeID(e)
		if seen[id] || contains(s.Accounted, id) {
			continue
		}
		seen[id] = true
		out = append(out, e)
	}
	return out
}

// ChargeID names the charge a ledger entry records: its request id, or,
// when the entry has none, everything it holds (key, time, pages and
// amount): two charges on one key without a request id are two, the same
// entry found twice is one. Every count of a job's purchases counts a
// charge once by it.
func ChargeID(e events.LedgerEntry) string {
	if e.RequestID != "" {
		return e.RequestID
	}
	return fmt.Sprintf("key:%s|at:%s|pages:%d|billed:%d|micros:%d",
		e.Key, e.At.UTC().Format(time.RFC3339Nano), e.Pages, e.BilledPages, e.AmountMicros)
}

func (b *emitter) cancel(in Cancel) error {
	if b.s.Status == StatusCancelled && in.By != "" {
		return nil // cancelled before: a repeat (its answer lost, say) changes nothing
	}
	if err := b.live(); err != nil {
		return err
	}
	if in.By == "" {
		return invalid("a cancellation says who cancels")
	}
	s := b.s
	if s.Status == StatusSending && b.now.Before(s.Lease.Until) {
		return &LeasedError{Worker: s.Lease.Worker, Until: s.Lease.Until}
	}
	c := events.JobCancelled{By: in.By, Reason: in.Reason}
	if cur, _ := s.Current(); cur.Unresolved() {
		c.Unresolved = cur.Key
	}
	b.add(c)
	return nil
}

func (b *emitter) repurchase(in AuthorizeRepurchase) error {
	if !b.s.Exists() {
		return ErrNoJob
	}
	if in.Seen != nil {
		switch n := *in.Seen; {
		case n < 0 || n > b.s.Repurchases:
			return invalid("re-purchases so far: %d, not the %d given", b.s.Repurchases, n)
		case n < b.s.Repurchases:
			return nil // the decision was carried out: a repeat changes nothing
		}
	}
	if b.s.Status != StatusChargedNoResult {
		return fmt.Errorf("%w: only a charged_no_result job can be bought again, this one is %s", ErrNotAllowed, b.s.Status)
	}
	if in.By == "" || in.Reason == "" {
		return invalid("a re-purchase says who authorised it and why")
	}
	cur, _ := b.s.Current()
	b.add(events.RepurchaseAuthorized{By: in.By, Reason: in.Reason})
	b.rotate(cur, ReasonRepurchase, b.now)
	return nil
}

// BodyHash is the hex SHA-256 of a body, as recorded with every key.
func BodyHash(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

func rotateReason(in Outcome) string {
	if in.Code != "" {
		return in.Code
	}
	return fmt.Sprintf("status_%d", in.Status)
}

func budgetMessage(reason string, p events.RetryPolicy) string {
	if reason == ReasonKeyBudget {
		return fmt.Sprintf("every one of the job's %d attempt keys failed", p.MaxKeys)
	}
	return fmt.Sprintf("no result within the job's age budget of %s", p.MaxAge.D())
}

func earliest(t time.Time, bounds ...time.Time) time.Time {
	for _, b := range bounds {
		if !b.IsZero() && b.Before(t) {
			t = b
		}
	}
	return t
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
