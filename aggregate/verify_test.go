package aggregate_test

import (
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/stretchr/testify/require"
)

// history returns a clean log: an unknown outcome, a same-key resend, a
// replayed 408, a new key and a success.
func history(t *testing.T) []events.Event {
	j := newJob(t)
	key, try := j.send("w1")
	j.must(aggregate.Outcome{Key: key, Try: try, Unknown: "timeout"})
	j.waitDue()
	key, try = j.send("w1")
	j.must(aggregate.Outcome{Key: key, Try: try, Status: 408, Code: "search_timeout", RequestID: "r1", Replayed: true})
	j.waitDue()
	key, try = j.send("w2")
	j.must(aggregate.Outcome{Key: key, Try: try, Status: 200, RequestID: "r2", Result: okResult})
	require.Empty(t, aggregate.Verify(j.log))
	return j.log
}

func TestVerifyFlagsDoctoredHistories(t *testing.T) {
	find := func(log []events.Event, typ string, nth int) int {
		for i, e := range log {
			if e.Type() == typ {
				if nth == 0 {
					return i
				}
				nth--
			}
		}
		t.Fatalf("no %s #%d", typ, nth)
		return -1
	}
	tests := []struct {
		name   string
		doctor func([]events.Event) []events.Event
		rule   string
	}{
		{"gap in versions", func(l []events.Event) []events.Event { return append(l[:3:3], l[4:]...) }, aggregate.RuleGapless},
		{"resent past the deadline", func(l []events.Event) []events.Event {
			i := find(l, events.TypeSent, 1)
			l[i].Time = l[find(l, events.TypeSent, 0)].Time.Add(14 * time.Minute)
			return l
		}, aggregate.RuleDeadline},
		{"body changed", func(l []events.Event) []events.Event {
			i := find(l, events.TypeKeyRotated, 0)
			r := l[i].Data.(events.KeyRotated)
			r.BodySHA256 = aggregate.BodyHash(`{"query":"other"}`)
			l[i].Data = r
			return l
		}, aggregate.RuleOneBody},
		{"new key after an unknown outcome", func(l []events.Event) []events.Event {
			i := find(l, events.TypeOutcomeClassified, 1)
			o := l[i].Data.(events.OutcomeClassified)
			o.Status, o.Code, o.Class = 0, "", string(aggregate.ClassUnknown)
			l[i].Data = o
			return l
		}, aggregate.RuleDefiniteFirst},
		{"key never stored", func(l []events.Event) []events.Event {
			i := find(l, events.TypeSent, 2)
			s := l[i].Data.(events.Sent)
			s.Key = "made-up"
			l[i].Data = s
			return l
		}, aggregate.RuleKeyPersisted},
		{"old key resent", func(l []events.Event) []events.Event {
			i := find(l, events.TypeSent, 2)
			s := l[i].Data.(events.Sent)
			s.Key = l[find(l, events.TypeSent, 0)].Data.(events.Sent).Key
			l[i].Data = s
			return l
		}, aggregate.RuleStaleKey},
		{"second charge", func(l []events.Event) []events.Event {
			last := l[len(l)-1]
			extra := last
			extra.Version++
			extra.Data = events.Reconciled{Verdict: aggregate.VerdictCharged, Charges: 1}
			return append(l, extra)
		}, aggregate.RuleOnePurchase},
		{"a lost response taken for a settled key", func(l []events.Event) []events.Event {
			i := find(l, events.TypeOutcomeClassified, 1)
			o := l[i].Data.(events.OutcomeClassified)
			o.Status, o.Code, o.Class = 409, "idempotency_replay_unavailable", string(aggregate.ClassReplayUnavailable)
			l[i].Data = o
			return l
		}, aggregate.RuleDefiniteFirst},
		{"a 429 on a resend taken for a settled key", func(l []events.Event) []events.Event {
			i := find(l, events.TypeOutcomeClassified, 1)
			o := l[i].Data.(events.OutcomeClassified)
			o.Status, o.Code, o.Class, o.Replayed = 429, "rate_limited", string(aggregate.ClassRateLimited), false
			l[i].Data = o
			return l
		}, aggregate.RuleDefiniteFirst},
		{"a 408 on a resend, not replayed, taken for a settled key", func(l []events.Event) []events.Event {
			i := find(l, events.TypeOutcomeClassified, 1)
			o := l[i].Data.(events.OutcomeClassified)
			o.Replayed = false
			l[i].Data = o
			return l
		}, aggregate.RuleDefiniteFirst},
		{"a rotation from a key that is not the current one", func(l []events.Event) []events.Event {
			i := find(l, events.TypeKeyRotated, 0)
			r := l[i].Data.(events.KeyRotated)
			r.OldKey = "some-other-key"
			l[i].Data = r
			return l
		}, aggregate.RuleDefiniteFirst},
		{"a reconciliation that found two charges", func(l []events.Event) []events.Event {
			last := l[len(l)-1]
			extra := last
			extra.Version++
			extra.Data = events.Reconciled{Verdict: aggregate.VerdictCharged, Charges: 2, Entries: []events.LedgerEntry{
				{RequestID: "ra", Key: "k1", BilledPages: 1}, {RequestID: "rb", Key: "k2", BilledPages: 1}}}
			l = append(l[:len(l)-1], extra)
			l[len(l)-1].Version = last.Version
			return l
		}, aggregate.RuleOnePurchase},
		{"two senders", func(l []events.Event) []events.Event {
			i := find(l, events.TypeOutcomeClassified, 0)
			s := l[i-1]
			s.Data = events.Sent{Key: s.Data.(events.Sent).Key, Try: 9, Worker: "intruder", LeaseUntil: s.Time.Add(time.Minute), Deadline: s.Data.(events.Sent).Deadline}
			l[i] = s
			l[i].Version = l[i-1].Version + 1
			return l
		}, aggregate.RuleConcurrentSend},
		{"work after the end", func(l []events.Event) []events.Event {
			last := l[len(l)-1]
			extra := last
			extra.Version++
			extra.Data = events.JobCancelled{By: "ops"}
			return append(l, extra)
		}, aggregate.RuleAfterTerminal},
		{"starts mid-way", func(l []events.Event) []events.Event {
			l = l[1:]
			for i := range l {
				l[i].Version = uint64(i + 1)
			}
			return l
		}, aggregate.RuleFirstEvent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log := tt.doctor(append([]events.Event(nil), history(t)...))
			v := aggregate.Verify(log)
			require.NotEmpty(t, v)
			rules := make([]string, len(v))
			for i, x := range v {
				rules[i] = x.Rule
				require.NotEmpty(t, x.JobID)
			}
			require.Contains(t, rules, tt.rule)
		})
	}
}

// repurchased returns a clean log of a job whose answer was lost after it
// was billed (charged_no_result, charge ra), bought again by an operator,
// and whose second answer was lost too (charge rb): two reconciliations,
// each listing the charge it found new.
func repurchased(t *testing.T) []events.Event {
	j := newJob(t)
	lost := func(reqID string, entries ...events.LedgerEntry) {
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Status: 409, Code: "idempotency_replay_unavailable", RequestID: reqID})
		j.now = j.s.Settled()
		q := j.s.ReconcileQuery()
		j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs, Entries: entries})
	}
	first := events.LedgerEntry{RequestID: "ra", Key: "00000000-0000-4000-8000-000000000002", Pages: 1, BilledPages: 1, AmountMicros: 1000}
	lost("ra", first)
	require.Equal(t, aggregate.StatusChargedNoResult, j.s.Status)
	j.must(aggregate.AuthorizeRepurchase{By: "ops", Reason: "needed"})
	key := j.key()
	lost("rb", first, events.LedgerEntry{RequestID: "rb", Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000})
	require.Equal(t, aggregate.StatusChargedNoResult, j.s.Status)
	require.Empty(t, aggregate.Verify(j.log))
	require.Equal(t, 2, aggregate.PurchasesOf(j.log).Total())
	return j.log
}

func TestVerifyFlagsDoctoredReconciliations(t *testing.T) {
	last := func(log []events.Event, typ string) int {
		for i := len(log) - 1; i >= 0; i-- {
			if log[i].Type() == typ {
				return i
			}
		}
		t.Fatalf("no %s", typ)
		return -1
	}
	reconciled := func(l []events.Event, edit func(*events.Reconciled)) []events.Event {
		i := last(l, events.TypeReconciled)
		r := l[i].Data.(events.Reconciled)
		edit(&r)
		l[i].Data = r
		return l
	}
	tests := []struct {
		name   string
		doctor func([]events.Event) []events.Event
		rule   string
	}{
		{"a charge found again", func(l []events.Event) []events.Event {
			first := l[last(l[:len(l)-3], events.TypeReconciled)].Data.(events.Reconciled).Entries[0]
			return reconciled(l, func(r *events.Reconciled) { r.Entries = append(r.Entries, first) })
		}, aggregate.RuleChargesOnce},
		{"a charge listed twice", func(l []events.Event) []events.Event {
			return reconciled(l, func(r *events.Reconciled) { r.Entries = append(r.Entries, r.Entries[0]) })
		}, aggregate.RuleChargesOnce},
		{"a charged verdict without its charge", func(l []events.Event) []events.Event {
			return reconciled(l, func(r *events.Reconciled) { r.Entries = nil })
		}, aggregate.RuleChargesOnce},
		{"a charge under a not_charged verdict", func(l []events.Event) []events.Event {
			return reconciled(l, func(r *events.Reconciled) { r.Verdict = aggregate.VerdictNotCharged })
		}, aggregate.RuleChargesOnce},
		{"not charged while the search may still run", func(l []events.Event) []events.Event {
			i := last(l, events.TypeReconciled)
			l = reconciled(l, func(r *events.Reconciled) { r.Verdict, r.Entries = aggregate.VerdictNotCharged, nil })
			l[i].Time = l[last(l, events.TypeSent)].Time.Add(5 * time.Second)
			return l
		}, aggregate.RuleSettledFirst},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := aggregate.Verify(tt.doctor(repurchased(t)))
			rules := make([]string, len(v))
			for i, x := range v {
				rules[i] = x.Rule
			}
			require.Contains(t, rules, tt.rule)
		})
	}
}

func TestVerifyFlagsAJobNotOfItsObservation(t *testing.T) {
	for name, doctor := range map[string]func(*events.JobScheduled){
		"another slot":   func(d *events.JobScheduled) { d.Slot = d.Slot.Add(time.Hour) },
		"another search": func(d *events.JobScheduled) { d.Search.Query = "espresso  scale" },
	} {
		t.Run(name, func(t *testing.T) {
			log := history(t)
			d := log[0].Data.(events.JobScheduled)
			doctor(&d)
			log[0].Data = d
			v := aggregate.Verify(log)
			require.Len(t, v, 1)
			require.Equal(t, aggregate.RuleJobIdentity, v[0].Rule, v[0].Detail)
		})
	}
}

// TestVerifyOneSenderWhateverTheName: the workers of one process share its
// name, and a restarted process takes it again; a second send inside the
// lease of one whose outcome is unknown is two senders all the same.
func TestVerifyOneSenderWhateverTheName(t *testing.T) {
	j := newJob(t)
	j.send("w1")
	j.now = j.now.Add(10 * time.Second)
	second := j.log[len(j.log)-1]
	second.Version++
	second.Time = j.now
	log := append(append([]events.Event(nil), j.log...), second)
	v := aggregate.Verify(log)
	require.NotEmpty(t, v)
	require.Equal(t, aggregate.RuleConcurrentSend, v[0].Rule)
}

// TestVerifyFlagsAStaleTryThatRotatesTheKey: the stale-try-rotates-key
// history as that bug wrote it. Worker A's try 1 gets a 429 and A stalls;
// its lease ends and worker B sends try 2, which runs and is billed; A's
// 429 for try 1 is then recorded and rotates the key, and the new key buys
// again. The 429 speaks only of try 1: it neither settles the key nor
// makes the rotation lawful.
func TestVerifyFlagsAStaleTryThatRotatesTheKey(t *testing.T) {
	j := newJob(t)
	k1, try := j.send("a")
	require.Equal(t, 1, try)
	j.now = j.now.Add(aggregate.DefaultPolicy().Lease.D() + time.Second)
	_, try = j.send("b") // A's lease ended: B resends the key
	require.Equal(t, 2, try)
	leaseB := j.s.Lease.Until
	j.now = j.now.Add(time.Second)
	j.record(events.OutcomeClassified{Key: k1, Try: 1, Status: 429, Code: "rate_limited",
		Class: string(aggregate.ClassRateLimited), Action: string(aggregate.ActionRetryNewKey), Attempt: 1, Sends: 2, NextRunAt: j.now})
	k2 := "00000000-0000-4000-8000-000000000999"
	j.record(events.KeyRotated{OldKey: k1, NewKey: k2, Attempt: 2, BodySHA256: j.s.BodySHA256, Reason: "rate_limited", NextRunAt: j.now})
	j.now = leaseB.Add(time.Second) // B froze: no second sender
	key, try := j.send("c")
	require.Equal(t, k2, key)
	j.must(aggregate.Outcome{Key: key, Try: try, Status: 200, RequestID: "r2", Result: okResult, Pages: 1})
	require.Equal(t, aggregate.StatusSucceeded, j.s.Status)

	v := aggregate.Verify(j.log)
	require.Equal(t, []string{aggregate.RuleStaleOutcome, aggregate.RuleDefiniteFirst}, ruleNames(v), "%v", v)
	require.Contains(t, v[0].Detail, "try 1")
	require.Contains(t, v[0].Detail, "try 2")
}

// TestVerifyStaleAnswerLeavesTheOutcomeUnknown: an answer of an older try,
// recorded after a newer try was sent, says nothing of the newer one: a
// third send inside the newer try's lease is a second sender all the same.
// So is an answer of a key already replaced.
func TestVerifyStaleAnswerLeavesTheOutcomeUnknown(t *testing.T) {
	lease := aggregate.DefaultPolicy().Lease.D()
	t.Run("an older try", func(t *testing.T) {
		j := newJob(t)
		k1, _ := j.send("a")
		j.now = j.now.Add(lease + time.Second)
		j.send("b") // try 2
		leaseB := j.s.Lease.Until
		j.now = j.now.Add(time.Second)
		j.record(events.OutcomeClassified{Key: k1, Try: 1, Unknown: "timeout",
			Class: string(aggregate.ClassUnknown), Action: string(aggregate.ActionRetrySameKey), Attempt: 1, Sends: 2, NextRunAt: j.now})
		j.now = j.now.Add(time.Second)
		require.True(t, j.now.Before(leaseB))
		j.record(events.Sent{Key: k1, Attempt: 1, Try: 3, Worker: "c", LeaseUntil: j.now.Add(lease), Deadline: j.s.Attempts[0].Deadline})
		v := aggregate.Verify(j.log)
		require.Equal(t, []string{aggregate.RuleStaleOutcome, aggregate.RuleConcurrentSend}, ruleNames(v), "%v", v)
	})
	t.Run("a replaced key", func(t *testing.T) {
		j := newJob(t)
		k1, try := j.send("a")
		j.must(aggregate.Outcome{Key: k1, Try: try, Status: 408, Code: "search_timeout", RequestID: "r1"})
		j.waitDue()
		k2, _ := j.send("b")
		require.NotEqual(t, k1, k2)
		j.now = j.now.Add(time.Second)
		j.record(events.OutcomeClassified{Key: k1, Try: 1, Unknown: "timeout",
			Class: string(aggregate.ClassUnknown), Action: string(aggregate.ActionRetrySameKey), Attempt: 1, Sends: 2, NextRunAt: j.now})
		j.now = j.now.Add(time.Second)
		j.record(events.Sent{Key: k2, Attempt: 2, Try: 2, Worker: "c", LeaseUntil: j.now.Add(lease), Deadline: j.s.Attempts[1].Deadline})
		v := aggregate.Verify(j.log)
		require.Equal(t, []string{aggregate.RuleStaleOutcome, aggregate.RuleConcurrentSend}, ruleNames(v), "%v", v)
	})
}
