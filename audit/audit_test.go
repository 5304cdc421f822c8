package audit_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections/projectionstest"
	"github.com/stretchr/testify/require"
)

var t0 = projectionstest.T0

type auditSetup struct {
	t    *testing.T
	jobs [][]events.Event
	now  time.Time
}

func setup(t *testing.T) *auditSetup {
	t.Helper()
	return &auditSetup{t: t, jobs: projectionstest.SampleLog(t), now: t0.Add(26 * time.Hour)}
}

// run audits the given histories (the sample log by default) at s.now.
func (s *auditSetup) run(histories ...[]events.Event) *audit.Auditor {
	if histories == nil {
		histories = s.jobs
	}
	a := audit.New(audit.Options{Now: s.now})
	for _, h := range histories {
		a.Add(audit.CheckJob(h, audit.Options{Now: s.now}), len(h))
	}
	return a
}

// ledger is what the provider charged for the sample log.
func (s *auditSetup) ledger() []events.LedgerEntry { return projectionstest.SampleLedger(s.jobs) }

func rules(r audit.Report) []string {
	var out []string
	for _, f := range r.Violations {
		out = append(out, f.Rule)
	}
	return out
}

func TestCleanLogKeepsEveryPromise(t *testing.T) {
	s := setup(t)
	a := s.run()
	a.Ledger(s.ledger())
	r := a.Report()
	require.True(t, r.OK(), "%v", r.Violations)
	require.Equal(t, 6, r.Jobs)
	require.Equal(t, 1, r.Pending, "the job scheduled for the day after tomorrow waits")
	require.Equal(t, 5, r.Purchases)
	require.Equal(t, 1, r.RepurchasesAuthorized)
	require.Equal(t, map[aggregate.Status]int{aggregate.StatusSucceeded: 4, aggregate.StatusFailed: 1,
		aggregate.StatusScheduled: 1}, r.Statuses)
	require.Equal(t, &audit.LedgerSummary{Charges: 4, Observations: 3, Reconciled: 1, BilledPages: 5, AmountMicros: 5000}, r.Ledger)
	require.Contains(t, r.Summary(), "every promise kept")
}

// TestDoctoredHistories: each broken promise is reported with the job and
// the rule.
func TestDoctoredHistories(t *testing.T) {
	find := func(h []events.Event, typ string, nth int) int {
		for i, e := range h {
			if e.Type() == typ {
				if nth == 0 {
					return i
				}
				nth--
			}
		}
		t.Fatalf("no %s", typ)
		return -1
	}
	tests := []struct {
		name   string
		job    int
		doctor func(h []events.Event) []events.Event
		rules  []string
	}{
		{"a gap in the versions", 1, func(h []events.Event) []events.Event {
			return slices.Delete(h, 3, 4) // the outcome of the first send: the second is a second sender
		}, []string{aggregate.RuleGapless, aggregate.RuleConcurrentSend}},
		{"a key resent past its deadline", 1, func(h []events.Event) []events.Event {
			i := find(h, events.TypeSent, 1)
			h[i].Time = h[find(h, events.TypeSent, 0)].Time.Add(14 * time.Minute)
			return h
		}, []string{aggregate.RuleDeadline}},
		{"a second charge", 0, func(h []events.Event) []events.Event {
			extra := h[len(h)-1]
			extra.Version++
			return append(h, extra)
		}, []string{aggregate.RuleOnePurchase, aggregate.RuleAfterTerminal}},
		{"a body change", 2, func(h []events.Event) []events.Event {
			i := find(h, events.TypeKeyRotated, 0)
			r := h[i].Data.(events.KeyRotated)
			r.BodySHA256 = aggregate.BodyHash(`{"query":"other"}`)
			h[i].Data = r
			return h
		}, []string{aggregate.RuleOneBody}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setup(t)
			id := s.jobs[tt.job][0].JobID
			s.jobs[tt.job] = tt.doctor(slices.Clone(s.jobs[tt.job]))
			r := s.run().Report()
			got := rules(r)
			if tt.rules[0] == aggregate.RuleGapless {
				got = slices.Compact(slices.Sorted(slices.Values(got))) // every later version is out of place too
				slices.Sort(tt.rules)
			}
			require.Equal(t, tt.rules, got)
			for _, f := range r.Violations {
				require.Equal(t, id, f.JobID)
			}
		})
	}
}

// TestPending: what an unfinished job may be doing at the audit's time.
func TestPending(t *testing.T) {
	ids := &projectionstest.IDs{}
	scheduled := projectionstest.NewJob(t, ids, "scheduled", t0)
	sending := projectionstest.NewJob(t, ids, "sending", t0)
	sending.Send()
	retrying := projectionstest.NewJob(t, ids, "retrying", t0)
	retrying.Send()
	retrying.Reply(aggregate.Outcome{Unknown: "connection_reset"})
	reconciling := projectionstest.NewJob(t, ids, "reconciling", t0)
	reconciling.Send()
	reconciling.Reply(aggregate.Outcome{Status: 409, Code: "idempotency_replay_unavailable", RequestID: "r"})
	lease := aggregate.DefaultPolicy().Lease.D()
	// A wait no decision plans: a month, past the job's day of age.
	parked := projectionstest.NewJob(t, ids, "parked", t0)
	parked.Send()
	parked.Reply(aggregate.Outcome{Unknown: "connection_reset"})
	last := &parked.Log[len(parked.Log)-1]
	o := last.Data.(events.OutcomeClassified)
	o.NextRunAt = t0.Add(30 * 24 * time.Hour)
	last.Data = o
	parked.S = aggregate.Fold(parked.Log)

	tests := []struct {
		name    string
		job     *projectionstest.Job
		at      time.Time
		pending string
		stuck   string
	}{
		{"waits for its slot", scheduled, t0.Add(-time.Hour), "scheduled, waiting until 2026-12-02T14:00:00Z", ""},
		{"due a moment ago", scheduled, t0.Add(time.Minute), "scheduled, due at 2026-12-02T14:00:00Z", ""},
		{"due long ago and never taken", scheduled, t0.Add(time.Hour), "",
			"scheduled, due at 2026-12-02T14:00:00Z, over 15m0s ago, and no worker took it"},
		{"sending within its lease", sending, t0.Add(time.Minute), "sending, waiting until 2026-12-02T14:02:00Z", ""},
		{"lease just ended", sending, t0.Add(lease + time.Minute), "sending, lease of w1 ended at 2026-12-02T14:02:00Z", ""},
		{"lease ended long ago", sending, t0.Add(lease + time.Hour), "",
			"sending, lease of w1 ended at 2026-12-02T14:02:00Z, over 15m0s ago, and no worker took it"},
		{"backing off", retrying, retrying.Now, "retrying, waiting until " + retrying.S.NextRunAt.Format(time.RFC3339), ""},
		{"reconciling, while the last search may run", reconciling, reconciling.Now.Add(time.Minute), "reconciling, waiting until 2026-12-02T14:02:00Z", ""},
		{"reconciling", reconciling, reconciling.Now.Add(lease + time.Minute), "reconciling since 2026-12-02T14:02:00Z", ""},
		{"reconciling for an hour", reconciling, reconciling.Now.Add(time.Hour), "",
			"reconciling since 2026-12-02T14:02:00Z, over 15m0s ago"},
		{"parked within its age budget", parked, t0.Add(time.Hour), "retrying, waiting until 2027-01-01T14:00:00Z", ""},
		{"parked past its age budget", parked, t0.Add(48 * time.Hour), "",
			"retrying, waiting until 2027-01-01T14:00:00Z, past its age budget, which ended at 2026-12-03T14:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pending, stuck := audit.Pending(tt.job.S, tt.at, audit.DefaultStuckAfter)
			require.Equal(t, tt.pending, pending)
			require.Equal(t, tt.stuck, stuck)
			j := audit.CheckJob(tt.job.Log, audit.Options{Now: tt.at})
			require.Equal(t, tt.pending, j.Pending)
			if tt.stuck != "" {
				require.Equal(t, []audit.Finding{{Rule: audit.RuleSettled, JobID: j.ID, Detail: tt.stuck}}, j.Findings)
			}
		})
	}
}

func TestLedgerJoin(t *testing.T) {
	s := setup(t)
	key := func(job, n int) string { return aggregate.Fold(s.jobs[job]).Attempts[n].Key }
	job := func(n int) string { return s.jobs[n][0].JobID }
	tests := []struct {
		name  string
		edit  func([]events.LedgerEntry) []events.LedgerEntry
		rules []string
		jobs  []string
	}{
		{"the same charge found twice counts once", func(l []events.LedgerEntry) []events.LedgerEntry {
			return append(l, l[0])
		}, nil, nil},
		{"a charge missing", func(l []events.LedgerEntry) []events.LedgerEntry {
			return l[1:]
		}, []string{audit.RuleOneCharge}, []string{job(0)}},
		{"a second charge on an accepted key", func(l []events.LedgerEntry) []events.LedgerEntry {
			return append(l, events.LedgerEntry{RequestID: "req_a2", Key: key(0, 0), Pages: 1, BilledPages: 1})
		}, []string{audit.RuleLedgerPurchases, audit.RuleOneCharge}, []string{job(0), job(0)}},
		{"a charge on a key whose 408 said nothing was billed", func(l []events.LedgerEntry) []events.LedgerEntry {
			return append(l, events.LedgerEntry{RequestID: "req_c1", Key: key(2, 0), Pages: 1, BilledPages: 1})
		}, []string{audit.RuleExplained}, []string{job(2)}},
		{"a charge of nobody's", func(l []events.LedgerEntry) []events.LedgerEntry {
			return append(l, events.LedgerEntry{RequestID: "req_x", Key: "00000000-0000-4000-8000-999999999999", Pages: 1})
		}, []string{audit.RuleExplained}, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := s.run()
			a.Ledger(tt.edit(s.ledger()))
			r := a.Report()
			require.Equal(t, tt.rules, rules(r), "%v", r.Violations)
			for i, f := range r.Violations {
				require.Equal(t, tt.jobs[i], f.JobID)
			}
		})
	}
}

// TestLedgerExplainsPendingAndCancelledJobs: a charge of a job still in
// flight, or on the key a cancelled job left unresolved, is accounted for.
func TestLedgerExplainsPendingAndCancelledJobs(t *testing.T) {
	ids := &projectionstest.IDs{}
	inflight := projectionstest.NewJob(t, ids, "in flight", t0)
	inflight.Send()
	cancelled := projectionstest.NewJob(t, ids, "cancelled", t0)
	cancelled.Send()
	cancelled.Reply(aggregate.Outcome{Unknown: "timeout"})
	cancelled.Do(aggregate.Cancel{By: "ops", Reason: "not needed"})
	k1, _ := inflight.Key()
	k2, _ := cancelled.Key()

	a := audit.New(audit.Options{Now: t0.Add(time.Minute)})
	for _, j := range []*projectionstest.Job{inflight, cancelled} {
		a.Add(audit.CheckJob(j.Log, audit.Options{Now: t0.Add(time.Minute)}), len(j.Log))
	}
	a.Ledger([]events.LedgerEntry{{RequestID: "r1", Key: k1, Pages: 1}, {RequestID: "r2", Key: k2, Pages: 1}})
	r := a.Report()
	require.True(t, r.OK(), "%v", r.Violations)
	require.Equal(t, 1, r.Ledger.InFlight)
	require.Equal(t, 1, r.Ledger.Cancelled)
}

func TestCommands(t *testing.T) {
	s := setup(t)
	known := s.jobs[0][0].JobID
	source := aggregate.Fold(s.jobs[0]).Source
	tests := []struct {
		name     string
		cmds     []audit.Command
		rejected map[uint64]string
		settled  uint64
		want     audit.CommandSummary
		rules    []string
	}{
		{"a job, the same job again and a rejection", []audit.Command{{Seq: 1, JobID: known}, {Seq: 2, JobID: known},
			{Seq: 3, Invalid: "bad slot"}}, map[uint64]string{3: "invalid_slot"}, 3,
			audit.CommandSummary{Commands: 3, Jobs: 2, Rejected: 1}, nil},
		{"a valid command without its job", []audit.Command{{Seq: 1, JobID: "0123"}}, nil, 1,
			audit.CommandSummary{Commands: 1, Lost: 1}, []string{audit.RuleCommand}},
		{"an invalid command without a rejection", []audit.Command{{Seq: 1, Invalid: "bad slot"}}, nil, 1,
			audit.CommandSummary{Commands: 1, Lost: 1}, []string{audit.RuleCommand}},
		{"commands the intake has not settled", []audit.Command{{Seq: 1, JobID: "0123"}, {Seq: 2, Invalid: "x"}}, nil, 0,
			audit.CommandSummary{Commands: 2, Pending: 2}, nil},
		{"a command rejected that also made its job", []audit.Command{{Seq: 1, JobID: known, Invalid: `has the field "query" twice`, Source: source}},
			map[uint64]string{1: "malformed"}, 1, audit.CommandSummary{Commands: 1, Rejected: 1}, []string{audit.RuleCommand}},
		{"a command rejected whose job another command made", []audit.Command{{Seq: 1, JobID: known, Invalid: `has the field "query" twice`, Source: source + "-other"}},
			map[uint64]string{1: "malformed"}, 1, audit.CommandSummary{Commands: 1, Rejected: 1}, nil},
		{"a command refused today, neither a job nor rejected", []audit.Command{{Seq: 1, JobID: "0123", Invalid: `has the field "query" twice`}}, nil, 1,
			audit.CommandSummary{Commands: 1, Lost: 1}, []string{audit.RuleCommand}},
		{"an ambiguous command the intake has not settled, its observation a job", []audit.Command{{Seq: 7, JobID: known, Invalid: `has the field "query" twice`}}, nil, 5,
			audit.CommandSummary{Commands: 1, Pending: 1}, nil},
		{"a stray its consumer has not reached", []audit.Command{{Seq: 1, Invalid: "nothing reads serp.cmd.x", Stray: true}}, nil, 5,
			audit.CommandSummary{Commands: 1, Pending: 1}, nil},
		{"schedule operations, one rejected", []audit.Command{{Seq: 1, ScheduleOp: true}, {Seq: 2, ScheduleOp: true}},
			map[uint64]string{2: "unknown_subject"}, 0, audit.CommandSummary{Commands: 2, Rejected: 1, ScheduleOps: 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := s.run()
			a.Commands(tt.cmds, tt.rejected, audit.Consumer{Floor: tt.settled}, audit.Consumer{})
			r := a.Report()
			require.Equal(t, &tt.want, r.Commands)
			require.Equal(t, tt.rules, rules(r))
		})
	}
}

func TestUnreadableEventsAreFindings(t *testing.T) {
	s := setup(t)
	a := s.run()
	a.Unreadable(7, "abc", errors.New("events: cannot decode Sent (schema 9) of job abc: schema is newer than this code knows"))
	r := a.Report()
	require.Equal(t, []string{audit.RuleReadable}, rules(r))
	require.Equal(t, uint64(7), r.Violations[0].Seq)
	require.Contains(t, r.Violations[0].String(), "job abc: readable_event")
}

// TestLedgerShowsAStaleStoredResultsCharge: the stale-success-hides-charge
// history. Worker A's try 1 finds nothing (free, zero pages) and A stalls;
// worker B's try 2 runs the search again and is billed; A's empty result
// is then stored. An ObservationStored carries no try, so the log alone
// cannot tell it from try 2's (outcome_of_latest_send's limit). It can
// tell that a result accepted after two sends was not marked for a check
// of its charges; the billing ledger shows try 2's charge, which nothing
// in the log explains.
func TestLedgerShowsAStaleStoredResultsCharge(t *testing.T) {
	ids := &projectionstest.IDs{}
	j := projectionstest.NewJob(t, ids, "stale success", t0)
	j.Send()
	j.Now = j.Now.Add(aggregate.DefaultPolicy().Lease.D() + time.Second)
	j.Do(aggregate.Due{Worker: "w2"}) // A's lease ended: B sends try 2
	key, tries := j.Key()
	require.Equal(t, 2, tries)
	j.Now = j.Now.Add(time.Second)
	stored := events.Event{ID: ids.EventID(), JobID: j.S.JobID, Version: uint64(len(j.Log) + 1), Time: j.Now,
		Data: events.ObservationStored{Key: key, RequestID: "req_try1", Result: projectionstest.Result("req_try1", 0)}}
	j.Log = append(j.Log, stored)

	at := j.Now.Add(time.Hour)
	a := audit.New(audit.Options{Now: at})
	a.Add(audit.CheckJob(j.Log, audit.Options{Now: at}), len(j.Log))
	require.Equal(t, []string{aggregate.RuleCheckUnproven}, rules(a.Report()), "the result of a resend is not marked for a check")
	a.Ledger([]events.LedgerEntry{{RequestID: "req_try2", Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000}})
	r := a.Report()
	require.ElementsMatch(t, []string{aggregate.RuleCheckUnproven, audit.RuleExplained}, rules(r), "%v", r.Violations)
	require.Equal(t, j.S.JobID, r.Violations[0].JobID)
}

// TestLedgerChargesWithoutARequestIDAreDistinct: the ledger join counts
// an entry found twice once, but only an entry with a request id is known
// by it. Two charges on an accepted key, neither with a request id, are
// two charges; the same entry without one, found twice, is one.
func TestLedgerChargesWithoutARequestIDAreDistinct(t *testing.T) {
	s := setup(t)
	key := aggregate.Fold(s.jobs[0]).Attempts[0].Key
	t.Run("two charges on one key", func(t *testing.T) {
		l := s.ledger()
		l[0].RequestID = ""
		l = append(l, events.LedgerEntry{Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: t0.Add(time.Hour)})
		a := s.run()
		a.Ledger(l)
		r := a.Report()
		require.Equal(t, []string{audit.RuleLedgerPurchases, audit.RuleOneCharge}, rules(r), "%v", r.Violations)
		require.Equal(t, 5, r.Ledger.Charges)
	})
	t.Run("one charge found twice", func(t *testing.T) {
		l := s.ledger()
		l[0].RequestID = ""
		l = append(l, l[0])
		a := s.run()
		a.Ledger(l)
		r := a.Report()
		require.True(t, r.OK(), "%v", r.Violations)
		require.Equal(t, 4, r.Ledger.Charges)
	})
}

// TestValidCommandRejectedOnlyForTheEngineConfiguration: a command the
// audit reads as valid may be refused only for what depends on the
// engine's configuration (an account it does not have); refused for
// anything else (malformed, a bad field), its observation was never bought
// though nothing was wrong with it.
func TestValidCommandRejectedOnlyForTheEngineConfiguration(t *testing.T) {
	valid := []audit.Command{{Seq: 1, JobID: "0123456789abcdef0123456789abcdef"}}
	for reason, bad := range map[string]bool{"invalid_account": false, "malformed": true, "invalid_slot": true, "too_large": true, "": true} {
		name := "rejected as " + reason
		if reason == "" {
			name = "rejected without a reason"
		}
		t.Run(name, func(t *testing.T) {
			a := setup(t).run()
			a.Commands(valid, map[uint64]string{1: reason}, audit.Consumer{Floor: 1}, audit.Consumer{})
			r := a.Report()
			require.Equal(t, &audit.CommandSummary{Commands: 1, Rejected: 1}, r.Commands)
			if !bad {
				require.True(t, r.OK(), "%v", r.Violations)
				return
			}
			require.Equal(t, []string{audit.RuleCommand}, rules(r))
			require.Equal(t, uint64(1), r.Violations[0].Seq)
			require.Contains(t, r.Violations[0].Detail, "valid")
		})
	}
}

// TestCommandsBehindAStuckFloor: one command the intake never settles (a
// command redelivered for ever) holds its acknowledgement floor. The
// commands after it the intake delivered and acknowledged without making
// their job are lost, not pending: only as many of them as the intake had
// deliveries outstanding can still be in its hands.
func TestCommandsBehindAStuckFloor(t *testing.T) {
	s := setup(t)
	cmds := []audit.Command{{Seq: 1, JobID: "01"}, {Seq: 2, JobID: "02"}, {Seq: 3, JobID: "03"}}
	tests := []struct {
		name   string
		intake audit.Consumer
		want   audit.CommandSummary
		rules  []string
	}{
		{"one outstanding of three delivered", audit.Consumer{Floor: 0, Delivered: 3, Outstanding: 1},
			audit.CommandSummary{Commands: 3, Pending: 1, Lost: 2}, []string{audit.RuleCommand}},
		{"all three outstanding", audit.Consumer{Floor: 0, Delivered: 3, Outstanding: 3},
			audit.CommandSummary{Commands: 3, Pending: 3}, nil},
		{"one outstanding, the others not delivered yet", audit.Consumer{Floor: 0, Delivered: 1, Outstanding: 1},
			audit.CommandSummary{Commands: 3, Pending: 3}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := s.run()
			a.Commands(cmds, nil, tt.intake, audit.Consumer{})
			r := a.Report()
			require.Equal(t, &tt.want, r.Commands)
			require.Equal(t, tt.rules, rules(r), "%v", r.Violations)
			if tt.rules != nil {
				require.Contains(t, r.Violations[0].Detail, "at least 2 were acknowledged and lost (among #1, #2, #3)")
			}
		})
	}
}

// TestCommandsStuckPastStuckAfter: a command after its consumer's floor
// with neither a job nor a rejection is pending for stuck_after from when
// the stream stored it, and stuck after that, like a job no worker took.
func TestCommandsStuckPastStuckAfter(t *testing.T) {
	s := setup(t)
	cmds := []audit.Command{
		{Seq: 1, JobID: "01", At: s.now.Add(-time.Hour)},
		{Seq: 2, JobID: "02", At: s.now.Add(-time.Minute)},
		{Seq: 3, Invalid: "nothing reads serp.cmd.x", Stray: true, At: s.now.Add(-time.Hour)},
		{Seq: 4, JobID: "04"}, // no time: pending
	}
	a := s.run()
	a.Commands(cmds, nil, audit.Consumer{}, audit.Consumer{})
	r := a.Report()
	require.Equal(t, &audit.CommandSummary{Commands: 4, Pending: 2, Stuck: 2}, r.Commands)
	require.Equal(t, []string{audit.RuleCommand, audit.RuleCommand}, rules(r))
	bySeq := map[uint64]string{}
	for _, f := range r.Violations {
		bySeq[f.Seq] = f.Detail
	}
	require.Contains(t, bySeq[1], "the intake has not settled it")
	require.Contains(t, bySeq[3], "the serpent-strays consumer has not settled it")
}

// TestJobIsACopy: what Job returns may be changed without changing the
// report.
func TestJobIsACopy(t *testing.T) {
	a := audit.New(audit.Options{})
	a.Add(audit.Job{ID: "j", Findings: []audit.Finding{{Rule: "r", JobID: "j", Detail: "as found"}}}, 1)
	j, ok := a.Job("j")
	require.True(t, ok)
	j.Findings[0].Detail = "changed"
	require.Equal(t, "as found", a.Report().Violations[0].Detail)
}

// doubleCharged returns the log of a job whose first answer was lost and
// whose resend the API ran and billed again: the check of its charges
// found both.
func doubleCharged(t *testing.T) ([]events.Event, []events.LedgerEntry) {
	ids := &projectionstest.IDs{}
	j := projectionstest.NewJob(t, ids, "double", t0)
	j.Send()
	j.Reply(aggregate.Outcome{Unknown: "timeout"})
	j.Send()
	j.Reply(aggregate.Outcome{Status: 200, RequestID: "req_2", Result: projectionstest.Result("req_2", 1), Pages: 1})
	key, _ := j.Key()
	charges := []events.LedgerEntry{{RequestID: "req_1", Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000},
		{RequestID: "req_2", Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000}}
	j.Now = j.S.Settled()
	j.Do(aggregate.LedgerAnswer{Keys: []string{key}, RequestIDs: []string{"req_2"}, Entries: charges})
	require.Equal(t, aggregate.VerdictDoubleCharge, j.S.Checked.Verdict)
	return j.Log, charges
}

// TestAuditShowsTheAPIsDoubleCharges: a double charge the API made under
// one key, found live, is counted and listed; the ledger join takes it for
// what the log says. One the log did not find is a finding.
func TestAuditShowsTheAPIsDoubleCharges(t *testing.T) {
	log, charges := doubleCharged(t)
	at := log[len(log)-1].Time.Add(time.Hour)
	a := audit.New(audit.Options{Now: at})
	a.Add(audit.CheckJob(log, audit.Options{Now: at}), len(log))
	a.Ledger(charges)
	r := a.Report()
	require.True(t, r.OK(), "%v", r.Violations)
	require.Equal(t, 1, r.Purchases)
	require.Equal(t, 1, r.DoubleCharges)
	require.Equal(t, []string{log[0].JobID}, r.DoubleChargedJobs)
	require.Equal(t, 1, r.Ledger.Observations)
	require.Equal(t, 1, r.Ledger.DoubleCharged)
	require.Contains(t, r.Summary(), "1 double charges of the API found")

	// The same charges against a check that found only one: the second is
	// silent in the log, and the join says so.
	c := log[len(log)-1].Data.(events.ChargesChecked)
	c.Entries, c.Charges, c.Verdict = c.Entries[1:], 1, aggregate.VerdictConfirmed
	log[len(log)-1].Data = c
	a = audit.New(audit.Options{Now: at})
	a.Add(audit.CheckJob(log, audit.Options{Now: at}), len(log))
	a.Ledger(charges)
	require.ElementsMatch(t, []string{audit.RuleLedgerPurchases, audit.RuleOneCharge}, rules(a.Report()))
}
