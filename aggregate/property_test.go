package aggregate_test

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

var (
	propSeed = flag.Uint64("prop.seed", 0, "base seed of the property test (0: pick one and print it)")
	propRuns = flag.Int("prop.runs", 20000, "sequences the property test runs")
)

// TestPromisesUnderRandomOutcomes drives thousands of jobs through random
// API outcomes, crashes, duplicate deliveries and clock jumps against a
// model of the provider, and checks promises 2 to 5 (docs/reliability.md):
// every key is stored before use, one body for all keys, no key is sent past
// its deadline, a new key comes only after a definite outcome, the provider
// bills at most one search per job, and every job finishes within its budget.
func TestPromisesUnderRandomOutcomes(t *testing.T) {
	base := *propSeed
	if base == 0 {
		base = uint64(time.Now().UnixNano())
	}
	runs := *propRuns
	if testing.Short() {
		runs = 500
	}
	stats := map[aggregate.Status]int{}
	for i := 0; i < runs; i++ {
		seed := base + uint64(i)
		status, err := runSequence(seed)
		if err != nil {
			t.Fatalf("seed %d (rerun: go test ./aggregate -run TestPromises -prop.seed %d -prop.runs 1): %v", seed, seed, err)
		}
		stats[status]++
	}
	t.Logf("base seed %d, %d sequences, final states %v", base, runs, stats)
	// The mix must actually exercise every ending.
	for _, st := range []aggregate.Status{aggregate.StatusSucceeded, aggregate.StatusFailed, aggregate.StatusChargedNoResult,
		"api_double_charge:" + aggregate.StatusSucceeded} {
		if runs >= 1000 && stats[st] == 0 {
			t.Errorf("no sequence ended %s; the generator is too narrow", st)
		}
	}
}

// provider models Serper.live for one job: what each key's last execution
// did, and what the ledger holds. It also breaks its own contract in the
// two ways an API may: a confirmed error answered before the key is looked
// up (the front door), and a billed key's record lost, so that a resend
// runs and bills the search again.
type provider struct {
	r      *rand.Rand
	window time.Duration
	keys   map[string]*execution
	// charges are the ledger's entries, by key.
	charges map[string][]events.LedgerEntry
}

type execution struct {
	at      time.Time
	expires time.Time
	status  int
	code    string
	reqID   string
	billed  bool
}

func (p *provider) send(key string, now time.Time) aggregate.Outcome {
	r := p.r
	out := aggregate.Outcome{Key: key}
	if r.Float64() < 0.08 {
		fd := []aggregate.Outcome{{Status: 503, Code: "service_unavailable"}, {Status: 408, Code: "search_timeout"},
			{Status: 424, Code: "upstream_failed"}, {Status: 429, Code: "rate_limited", RetryAfter: 5 * time.Second}}[r.IntN(4)]
		fd.Key, fd.RequestID = key, fmt.Sprintf("fd_%d", r.Uint32())
		return fd
	}
	if x := p.keys[key]; x != nil && x.billed && x.finished(now) && r.Float64() < 0.05 {
		// The record is lost: the search runs and is billed again.
		x = &execution{at: now, expires: now.Add(p.window), status: 200, billed: true, reqID: fmt.Sprintf("req_%d", r.Uint32())}
		p.keys[key] = x
		p.bill(key, x)
		if r.Float64() < 0.3 {
			out.Unknown = "connection" // its reply is lost too
			return out
		}
		return x.reply(key, false)
	}
	if x := p.keys[key]; x != nil {
		if !now.Before(x.expires) {
			if x.billed {
				return aggregate.Outcome{Key: key, Status: 409, Code: "idempotency_replay_unavailable", RequestID: x.reqID}
			}
			delete(p.keys, key) // an unbilled key is forgotten: a fresh search runs
		} else {
			switch f := r.Float64(); {
			case f < 0.1:
				out.Unknown = "connection"
				return out
			case f < 0.2 && now.Sub(x.at) < 90*time.Second:
				return aggregate.Outcome{Key: key, Status: 409, Code: "idempotency_in_progress", RequestID: "ip"}
			}
			return x.reply(key, true)
		}
	}
	if r.Float64() < 0.1 { // dropped before the search ran
		out.Unknown = "connection"
		return out
	}
	x := &execution{at: now, reqID: fmt.Sprintf("req_%d", r.Uint32())}
	x.expires = now.Add(p.window)
	if r.Float64() < 0.1 { // early cache expiry
		x.expires = now.Add(time.Duration(r.Int64N(int64(p.window))))
	}
	switch f := r.Float64(); {
	case f < 0.5:
		x.status, x.billed = 200, true
	case f < 0.55:
		x.status = 200 // zero results: free
	case f < 0.7:
		x.status, x.code = 408, "search_timeout"
	case f < 0.78:
		x.status, x.code = 424, "upstream_failed"
	case f < 0.86:
		x.status, x.code = 503, "service_unavailable"
	case f < 0.95:
		x.status, x.code = 429, "rate_limited"
	default:
		x.status, x.code = 422, "invalid_request"
	}
	p.keys[key] = x
	if x.billed {
		p.bill(key, x)
	}
	switch f := r.Float64(); {
	case f < 0.1:
		out.Unknown = "connection" // dropped after the search ran
		return out
	case f < 0.15:
		out.Unknown = "gateway_page"
		return out
	case f < 0.2 && x.status == 200:
		return aggregate.Outcome{Key: key, Status: 503, Code: "billing_unavailable", RequestID: x.reqID}
	}
	return x.reply(key, false)
}

// finished reports whether the execution is over at now (a search runs
// up to 90 s).
func (x *execution) finished(now time.Time) bool { return now.Sub(x.at) >= 90*time.Second }

func (p *provider) bill(key string, x *execution) {
	p.charges[key] = append(p.charges[key], events.LedgerEntry{RequestID: x.reqID, Key: key, Pages: 1, BilledPages: 1})
}

func (x *execution) reply(key string, replayed bool) aggregate.Outcome {
	o := aggregate.Outcome{Key: key, Status: x.status, Code: x.code, RequestID: x.reqID, Replayed: replayed}
	if x.status == 200 {
		o.Result, o.Pages = okResult, 1
	}
	if x.status == 429 {
		o.RetryAfter = 30 * time.Second
	}
	return o
}

func (p *provider) ledger(q aggregate.ReconcileQuery) aggregate.LedgerAnswer {
	a := aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs}
	for _, k := range q.Keys {
		for _, e := range p.charges[k] {
			a.Entries = append(a.Entries, e, e) // found by key and by request id
		}
	}
	return a
}

// runSequence runs one job to its end and returns its final status, or the
// first broken promise. The status of a job the provider charged twice
// under one key (found live, as it must be) is prefixed api_double_charge.
func runSequence(seed uint64) (aggregate.Status, error) {
	r := rand.New(rand.NewPCG(seed, seed>>1|1))
	policy := aggregate.DefaultPolicy()
	policy.MaxKeys = 1 + r.IntN(6)
	policy.MaxAge = events.Duration(time.Duration(5+r.IntN(600)) * time.Minute)
	p := &provider{r: r, window: policy.ReplayWindow.D(), keys: map[string]*execution{}, charges: map[string][]events.LedgerEntry{}}
	d := aggregate.Decider{Table: aggregate.DefaultTable()}
	ids := &seqIDs{}
	now := t0
	sched, err := aggregate.NewSchedule(aggregate.ScheduleCommand{Slot: t0.Format(time.RFC3339),
		Query: "espresso scale", Country: "US", Language: "en", Device: "mobile"}, policy, "prop")
	if err != nil {
		return "", err
	}
	var s aggregate.State
	var log []events.Event
	decide := func(in aggregate.Input) ([]events.Event, error) {
		evs, err := d.Decide(s, in, now, ids)
		for _, e := range evs {
			s = aggregate.Apply(s, e)
		}
		log = append(log, evs...)
		return evs, err
	}
	jump := func() time.Duration {
		if r.Float64() < 0.05 {
			return time.Duration(r.Int64N(int64(30 * time.Minute))) // downtime
		}
		return time.Duration(r.Int64N(int64(5 * time.Second)))
	}
	if _, err := decide(sched); err != nil {
		return "", err
	}
	var lastOutcome *aggregate.Outcome
	for step := 0; ; step++ {
		if step > 10000 {
			return "", fmt.Errorf("no terminal state after %d steps: %s", step, s.Status)
		}
		next := s.Next(now)
		switch next.Step {
		case aggregate.StepDone:
			if v := aggregate.Verify(log); len(v) > 0 {
				return "", fmt.Errorf("violations: %v", v)
			}
			limit := aggregate.AgeDeadline(policy, s.ScheduledAt).Add(3 * time.Hour)
			if now.After(limit) {
				return "", fmt.Errorf("finished at %s, past its budget", now)
			}
			bought, doubled := 0, 0
			for _, c := range p.charges {
				bought++
				doubled += len(c) - 1
			}
			if bought > 1 {
				return "", fmt.Errorf("the provider billed %d keys of one job", bought)
			}
			if got := aggregate.PurchasesOf(log); got.Doubled != doubled {
				return "", fmt.Errorf("the provider charged one key %d times more than once, the log found %d", doubled, got.Doubled)
			}
			if doubled > 0 {
				return "api_double_charge:" + s.Status, nil
			}
			return s.Status, nil
		case aggregate.StepWait:
			now = next.At.Add(jump())
		case aggregate.StepReconcile:
			var ns *aggregate.NotSettledError
			if _, err := decide(p.ledger(s.ReconcileQuery())); errors.As(err, &ns) {
				now = ns.Until.Add(jump()) // the ledger may be behind: ask again then
			} else if err != nil {
				return "", fmt.Errorf("reconcile: %w", err)
			}
		case aggregate.StepSend:
			evs, err := decide(aggregate.Due{Worker: fmt.Sprintf("w%d", r.IntN(3))})
			if err != nil {
				return "", fmt.Errorf("due: %w", err)
			}
			sent, ok := evs[0].Data.(events.Sent)
			if !ok {
				continue // moved to reconciliation or failed
			}
			// A second delivery of the same job must find it claimed.
			if r.Float64() < 0.1 {
				if _, err := d.Decide(s, aggregate.Due{Worker: "intruder"}, now, ids); !errors.Is(err, aggregate.ErrLeased) {
					return "", fmt.Errorf("a second delivery was not kept out: %v", err)
				}
			}
			if !now.Before(sent.Deadline) {
				return "", fmt.Errorf("claimed %s at %s past its deadline %s", sent.Key, now, sent.Deadline)
			}
			out := p.send(sent.Key, now)
			out.Try = sent.Try
			if r.Float64() < 0.05 { // the worker dies before recording the outcome
				now = sent.LeaseUntil.Add(jump())
				continue
			}
			now = now.Add(time.Duration(r.Int64N(int64(100 * time.Second))))
			if _, err := decide(out); err != nil && !errors.Is(err, aggregate.ErrStaleOutcome) {
				return "", fmt.Errorf("outcome %+v: %w", out, err)
			}
			lastOutcome = &out
		}
		// A redelivered outcome decides nothing new.
		if lastOutcome != nil && r.Float64() < 0.05 {
			before := len(log)
			evs, err := d.Decide(s, *lastOutcome, now, ids)
			if err == nil && len(evs) > 0 && before > 0 {
				if _, isStore := evs[0].Data.(events.ObservationStored); isStore {
					return "", fmt.Errorf("a redelivered outcome stored a second observation")
				}
			}
		}
	}
}
