package aggregate_test

import (
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/stretchr/testify/require"
)

// TestOutcomeTable walks every row of the seed's retry decision table
// (retry.mjs) and serpent's refinements: the events Decide writes after one
// send, and whether the key survives.
func TestOutcomeTable(t *testing.T) {
	tests := []struct {
		name    string
		out     aggregate.Outcome
		types   []string
		action  aggregate.Action
		sameKey bool
		status  aggregate.Status
	}{
		// retry.mjs: retryAction() with no status.
		{"no reply", aggregate.Outcome{Unknown: "connection"}, []string{"OutcomeClassified"}, aggregate.ActionRetrySameKey, true, aggregate.StatusRetrying},
		{"gateway page is unknown", aggregate.Outcome{Unknown: "gateway_page"}, []string{"OutcomeClassified"}, aggregate.ActionRetrySameKey, true, aggregate.StatusRetrying},
		{"unreadable reply", aggregate.Outcome{Unknown: "unreadable_body"}, []string{"OutcomeClassified"}, aggregate.ActionRetrySameKey, true, aggregate.StatusRetrying},
		{"409 in progress", aggregate.Outcome{Status: 409, Code: "idempotency_in_progress", RequestID: "r1"}, []string{"OutcomeClassified"}, aggregate.ActionRetrySameKey, true, aggregate.StatusRetrying},
		{"409 replay unavailable", aggregate.Outcome{Status: 409, Code: "idempotency_replay_unavailable", RequestID: "r1"}, []string{"OutcomeClassified"}, aggregate.ActionReconcile, true, aggregate.StatusReconciling},
		{"408", aggregate.Outcome{Status: 408, Code: "search_timeout", RequestID: "r1"}, []string{"OutcomeClassified", "KeyRotated"}, aggregate.ActionRetryNewKey, false, aggregate.StatusRetrying},
		{"424", aggregate.Outcome{Status: 424, Code: "upstream_failed", RequestID: "r1"}, []string{"OutcomeClassified", "KeyRotated"}, aggregate.ActionRetryNewKey, false, aggregate.StatusRetrying},
		{"503", aggregate.Outcome{Status: 503, Code: "service_unavailable", RequestID: "r1"}, []string{"OutcomeClassified", "KeyRotated"}, aggregate.ActionRetryNewKey, false, aggregate.StatusRetrying},
		{"200", aggregate.Outcome{Status: 200, RequestID: "r1", Result: okResult, Pages: 1}, []string{"ObservationStored"}, aggregate.ActionStore, true, aggregate.StatusSucceeded},
		{"422", aggregate.Outcome{Status: 422, Code: "invalid_request", RequestID: "r1"}, []string{"JobFailed"}, aggregate.ActionFail, true, aggregate.StatusFailed},
		// serpent's refinements.
		{"503 billing unavailable keeps the key", aggregate.Outcome{Status: 503, Code: "billing_unavailable", RequestID: "r1"}, []string{"OutcomeClassified"}, aggregate.ActionRetrySameKey, true, aggregate.StatusRetrying},
		{"429 waits and rotates", aggregate.Outcome{Status: 429, Code: "rate_limited", RequestID: "r1", RetryAfter: 30 * time.Second}, []string{"OutcomeClassified", "KeyRotated"}, aggregate.ActionRetryNewKey, false, aggregate.StatusRetrying},
		{"401 fails", aggregate.Outcome{Status: 401, Code: "unauthorized", RequestID: "r1"}, []string{"JobFailed"}, aggregate.ActionFail, true, aggregate.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := newJob(t)
			key, try := j.send("w1")
			tt.out.Key, tt.out.Try = key, try
			evs := j.must(tt.out)
			require.Equal(t, tt.types, types(evs))
			require.Equal(t, tt.status, j.s.Status)
			require.Equal(t, tt.sameKey, j.key() == key, "key kept")
			if oc, ok := evs[0].Data.(events.OutcomeClassified); ok {
				require.Equal(t, string(tt.action), oc.Action)
				require.Equal(t, tt.out.Status, oc.Status)
				require.Equal(t, tt.out.RequestID, oc.RequestID)
				require.Equal(t, 1, oc.Attempt)
				require.Equal(t, 1, oc.Sends)
				if tt.out.RetryAfter > 0 {
					require.False(t, oc.NextRunAt.Before(j.now.Add(tt.out.RetryAfter)), "Retry-After honoured")
				}
			}
			if !tt.sameKey {
				rot := evs[1].Data.(events.KeyRotated)
				require.Equal(t, key, rot.OldKey)
				require.Equal(t, j.s.BodySHA256, rot.BodySHA256)
				require.Equal(t, 2, rot.Attempt)
				// The new key is sent next, with the same body.
				j.waitDue()
				k2, _ := j.send("w1")
				require.Equal(t, rot.NewKey, k2)
			}
			require.Empty(t, aggregate.Verify(j.log))
		})
	}
}

func TestUnknownAtDeadlineReconciles(t *testing.T) {
	j := newJob(t)
	key, try := j.send("w1")
	deadline := t0.Add(13 * time.Minute)
	for {
		j.must(aggregate.Outcome{Key: key, Try: try, Unknown: "timeout"})
		require.False(t, j.s.NextRunAt.After(deadline), "a resend is never planned past the deadline")
		j.waitDue()
		evs := j.must(aggregate.Due{Worker: "w1"})
		if d, ok := evs[0].Data.(events.DeadlineReached); ok {
			require.Equal(t, key, d.Key)
			require.Equal(t, deadline, d.Deadline)
			require.Equal(t, aggregate.ReasonReplayDeadline, d.Reason)
			break
		}
		sent := evs[0].Data.(events.Sent)
		require.Equal(t, key, sent.Key, "same key until the outcome is definite")
		require.True(t, j.now.Before(deadline))
		try = sent.Try
	}
	require.Equal(t, aggregate.StatusReconciling, j.s.Status)
	// The last send may have started a search that is still running:
	// the ledger is asked once it must have ended.
	require.Equal(t, aggregate.Next{Step: aggregate.StepWait, At: j.s.Settled()}, j.s.Next(j.now))
	j.waitDue()
	require.Equal(t, aggregate.StepReconcile, j.s.Next(j.now).Step)
	_, err := j.try(aggregate.Due{Worker: "w1"})
	require.ErrorIs(t, err, aggregate.ErrMustReconcile)
	require.Equal(t, []string{key}, j.s.ReconcileQuery().Keys)
	require.Empty(t, aggregate.Verify(j.log))
}

func TestReconciliation(t *testing.T) {
	setup := func(t *testing.T) (*job, string) {
		j := newJob(t)
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Status: 409, Code: "idempotency_replay_unavailable", RequestID: "req_A"})
		require.Equal(t, aggregate.StatusReconciling, j.s.Status)
		return j, key
	}
	// atDeadline: a key sent, answered "in progress" (req_A) and then
	// never again, until its deadline.
	atDeadline := func(t *testing.T) (*job, string) {
		j := newJob(t)
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Status: 409, Code: "idempotency_in_progress", RequestID: "req_A"})
		for {
			j.waitDue()
			evs := j.must(aggregate.Due{Worker: "w1"})
			sent, ok := evs[0].Data.(events.Sent)
			if !ok {
				break
			}
			j.must(aggregate.Outcome{Key: key, Try: sent.Try, Unknown: "timeout"})
		}
		require.Equal(t, aggregate.StatusReconciling, j.s.Status)
		return j, key
	}
	t.Run("no charge is conclusive only once the last search must have ended", func(t *testing.T) {
		j, _ := setup(t)
		settled := j.s.Settled()
		require.Equal(t, j.s.Attempts[0].LastSend.Add(2*time.Minute), settled, "last send plus the lease")
		require.Equal(t, aggregate.Next{Step: aggregate.StepWait, At: settled}, j.s.Next(j.now))
		q := j.s.ReconcileQuery()
		_, err := j.try(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs})
		var ns *aggregate.NotSettledError
		require.ErrorAs(t, err, &ns)
		require.Equal(t, settled, ns.Until)
		require.ErrorIs(t, err, aggregate.ErrNotSettled)
		j.now = settled
		require.Equal(t, aggregate.StepReconcile, j.s.Next(j.now).Step)
	})
	t.Run("no charge of a key unknown at its deadline rotates the key", func(t *testing.T) {
		j, key := atDeadline(t)
		j.now = j.s.Settled()
		q := j.s.ReconcileQuery()
		require.Equal(t, []string{"req_A"}, q.RequestIDs)
		evs := j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs})
		require.Equal(t, []string{"Reconciled", "KeyRotated"}, types(evs))
		rec := evs[0].Data.(events.Reconciled)
		require.Equal(t, aggregate.VerdictNotCharged, rec.Verdict)
		require.Zero(t, rec.Charges)
		require.NotEqual(t, key, j.key())
		require.Equal(t, aggregate.StatusRetrying, j.s.Status)
		require.Empty(t, aggregate.Verify(j.log))
	})
	t.Run("a charge ends in charged_no_result", func(t *testing.T) {
		j, key := setup(t)
		q := j.s.ReconcileQuery()
		entry := events.LedgerEntry{RequestID: "req_A", Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000}
		// The same charge found by key and by request id, and again on a
		// retried look-up, counts once.
		evs := j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs, Entries: []events.LedgerEntry{entry, entry, entry}})
		rec := evs[0].Data.(events.Reconciled)
		require.Equal(t, aggregate.VerdictCharged, rec.Verdict)
		require.Equal(t, 1, rec.Charges)
		require.Equal(t, aggregate.StatusChargedNoResult, j.s.Status)
		require.True(t, j.s.Status.Terminal())
		require.Equal(t, aggregate.StepDone, j.s.Next(j.now).Step)
		require.Empty(t, aggregate.Verify(j.log))
	})
	t.Run("a charge is conclusive at once", func(t *testing.T) {
		j, key := setup(t)
		q := j.s.ReconcileQuery()
		evs := j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs,
			Entries: []events.LedgerEntry{{RequestID: "req_A", Key: key, BilledPages: 1}}})
		require.Equal(t, aggregate.VerdictCharged, evs[0].Data.(events.Reconciled).Verdict)
	})
	t.Run("other jobs' charges are ignored", func(t *testing.T) {
		j, _ := atDeadline(t)
		j.now = j.s.Settled()
		q := j.s.ReconcileQuery()
		evs := j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs,
			Entries: []events.LedgerEntry{{RequestID: "req_other", Key: "someone-else", BilledPages: 1}}})
		require.Equal(t, aggregate.VerdictNotCharged, evs[0].Data.(events.Reconciled).Verdict)
	})
	t.Run("an answer must cover every key", func(t *testing.T) {
		j, _ := setup(t)
		_, err := j.try(aggregate.LedgerAnswer{RequestIDs: []string{"req_A"}})
		require.ErrorIs(t, err, aggregate.ErrInvalidInput)
	})
	t.Run("not reconciling", func(t *testing.T) {
		j := newJob(t)
		_, err := j.try(aggregate.LedgerAnswer{})
		require.ErrorIs(t, err, aggregate.ErrNotReconciling)
	})
}

func TestRepurchaseIsDeliberate(t *testing.T) {
	j := newJob(t)
	key, try := j.send("w1")
	j.must(aggregate.Outcome{Key: key, Try: try, Status: 409, Code: "idempotency_replay_unavailable", RequestID: "req_A"})
	q := j.s.ReconcileQuery()
	j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs,
		Entries: []events.LedgerEntry{{RequestID: "req_A", Key: key, BilledPages: 1}}})
	_, err := j.try(aggregate.AuthorizeRepurchase{By: "ops"})
	require.ErrorIs(t, err, aggregate.ErrInvalidInput, "a reason is required")
	evs := j.must(aggregate.AuthorizeRepurchase{By: "ops", Reason: "report needs it"})
	require.Equal(t, []string{"RepurchaseAuthorized", "KeyRotated"}, types(evs))
	k2, try2 := j.send("w1")
	require.NotEqual(t, key, k2)
	j.must(aggregate.Outcome{Key: k2, Try: try2, Status: 200, RequestID: "req_B", Result: okResult})
	require.Equal(t, aggregate.StatusSucceeded, j.s.Status)
	require.Empty(t, aggregate.Verify(j.log), "two purchases, one authorised")

	_, err = j.try(aggregate.AuthorizeRepurchase{By: "ops", Reason: "again"})
	require.ErrorIs(t, err, aggregate.ErrNotAllowed)
}

// TestRepurchaseRepeatedBuysOnce: an operator's request repeated after its
// answer was lost must not authorise a second re-purchase, even when the
// first one ended charged_no_result again by then.
func TestRepurchaseRepeatedBuysOnce(t *testing.T) {
	lose := func(j *job, reqID string) {
		t.Helper()
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Status: 409, Code: "idempotency_replay_unavailable", RequestID: reqID})
		q := j.s.ReconcileQuery()
		j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs,
			Entries: []events.LedgerEntry{{RequestID: reqID, Key: key, BilledPages: 1}}})
		require.Equal(t, aggregate.StatusChargedNoResult, j.s.Status)
	}
	seen := func(n int) *int { return &n }
	j := newJob(t)
	lose(j, "req_A")

	_, err := j.try(aggregate.AuthorizeRepurchase{By: "ops", Reason: "report", Seen: seen(1)})
	require.ErrorIs(t, err, aggregate.ErrInvalidInput, "the job has had no re-purchase yet")
	_, err = j.try(aggregate.AuthorizeRepurchase{By: "ops", Reason: "report", Seen: seen(-1)})
	require.ErrorIs(t, err, aggregate.ErrInvalidInput)

	evs := j.must(aggregate.AuthorizeRepurchase{By: "ops", Reason: "report", Seen: seen(0)})
	require.Equal(t, []string{"RepurchaseAuthorized", "KeyRotated"}, types(evs))
	require.Empty(t, j.must(aggregate.AuthorizeRepurchase{By: "ops", Reason: "report", Seen: seen(0)}),
		"a repeat while the new key is pending changes nothing")

	lose(j, "req_B") // the re-purchase is lost too
	require.Empty(t, j.must(aggregate.AuthorizeRepurchase{By: "ops", Reason: "report", Seen: seen(0)}),
		"a late repeat of the first decision buys nothing more")
	require.Equal(t, aggregate.StatusChargedNoResult, j.s.Status)
	require.Equal(t, 1, j.s.Repurchases)

	evs = j.must(aggregate.AuthorizeRepurchase{By: "ops", Reason: "report, again", Seen: seen(1)})
	require.Equal(t, []string{"RepurchaseAuthorized", "KeyRotated"}, types(evs), "a decision taken on the new status")
	require.Empty(t, aggregate.Verify(j.log))
}

func TestClaimAndLease(t *testing.T) {
	t.Run("not due before the slot", func(t *testing.T) {
		j := newJob(t)
		j.now = t0.Add(-time.Minute)
		_, err := j.try(aggregate.Due{Worker: "w1"})
		var nd *aggregate.NotDueError
		require.ErrorAs(t, err, &nd)
		require.Equal(t, t0, nd.Until)
		require.ErrorIs(t, err, aggregate.ErrNotDue)
	})
	t.Run("a held lease keeps others out", func(t *testing.T) {
		j := newJob(t)
		j.send("w1")
		j.now = j.now.Add(time.Minute)
		_, err := j.try(aggregate.Due{Worker: "w2"})
		var le *aggregate.LeasedError
		require.ErrorAs(t, err, &le)
		require.Equal(t, "w1", le.Worker)
		require.Equal(t, aggregate.StepWait, j.s.Next(j.now).Step)
	})
	t.Run("a crashed worker's job resumes with the same key", func(t *testing.T) {
		j := newJob(t)
		key, _ := j.send("w1")
		j.now = j.s.Lease.Until
		require.Equal(t, aggregate.StepSend, j.s.Next(j.now).Step)
		k2, try := j.send("w2")
		require.Equal(t, key, k2)
		require.Equal(t, 2, try)
		// The first worker's late answers decide nothing: only the latest
		// send speaks for the key. A 429 ran nothing, and the second send
		// may have run and been billed; a free result may have been
		// forgotten and run again by the second send.
		for _, late := range []aggregate.Outcome{
			{Key: key, Try: 1, Unknown: "timeout"},
			{Key: key, Try: 1, Status: 429, Code: "rate_limited", RequestID: "r0"},
			{Key: key, Try: 1, Status: 200, RequestID: "r0", Result: okResult},
		} {
			_, err := j.try(late)
			require.ErrorIs(t, err, aggregate.ErrStaleOutcome)
		}
		evs := j.must(aggregate.Outcome{Key: key, Try: 2, Status: 200, RequestID: "r", Result: okResult, Replayed: true})
		require.Equal(t, []string{"ObservationStored"}, types(evs))
		require.Empty(t, aggregate.Verify(j.log))
	})
	t.Run("finished jobs take nothing", func(t *testing.T) {
		j := newJob(t)
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Status: 200, RequestID: "r", Result: okResult})
		for _, in := range []aggregate.Input{aggregate.Due{Worker: "w"}, aggregate.Outcome{Key: key, Try: try, Unknown: "x"},
			aggregate.LedgerAnswer{}, aggregate.Cancel{By: "ops"}} {
			_, err := j.try(in)
			require.ErrorIs(t, err, aggregate.ErrTerminal, "%T", in)
		}
	})
	t.Run("outcome of an old key", func(t *testing.T) {
		j := newJob(t)
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Status: 408, Code: "search_timeout"})
		_, err := j.try(aggregate.Outcome{Key: key, Try: try, Status: 200, Result: okResult})
		require.ErrorIs(t, err, aggregate.ErrStaleOutcome)
	})
	t.Run("a send's answer recorded twice", func(t *testing.T) {
		// A resend's 429 keeps the key (it ran nothing): its write landed
		// without an answer, and the worker, reading the job again, offers
		// the same answer again.
		j := newJob(t)
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Unknown: "timeout"})
		j.now = j.s.Next(j.now).At
		key, try = j.send("w1")
		answer := aggregate.Outcome{Key: key, Try: try, Status: 429, Code: "rate_limited", RequestID: "r2"}
		j.must(answer)
		_, err := j.try(answer)
		require.ErrorIs(t, err, aggregate.ErrStaleOutcome)
	})
	t.Run("a 200 without a result is refused", func(t *testing.T) {
		j := newJob(t)
		key, try := j.send("w1")
		_, err := j.try(aggregate.Outcome{Key: key, Try: try, Status: 200})
		require.ErrorIs(t, err, aggregate.ErrInvalidInput)
	})
	t.Run("schedule twice", func(t *testing.T) {
		j := newJob(t)
		sched, err := aggregate.NewSchedule(aggregate.ScheduleCommand{Slot: t0.Format(time.RFC3339), Query: "espresso scale",
			Country: "us", Language: "EN", Device: "Mobile"}, aggregate.DefaultPolicy(), "test")
		require.NoError(t, err)
		require.Equal(t, j.s.JobID, sched.JobID, "same observation, same job")
		_, err = j.try(sched)
		require.ErrorIs(t, err, aggregate.ErrExists)
	})
	t.Run("due needs a worker", func(t *testing.T) {
		j := newJob(t)
		_, err := j.try(aggregate.Due{})
		require.ErrorIs(t, err, aggregate.ErrInvalidInput)
		_, err = aggregate.Decide(aggregate.State{}, aggregate.Due{Worker: "w"}, t0, &seqIDs{})
		require.ErrorIs(t, err, aggregate.ErrNoJob)
	})
}

func TestBudgets(t *testing.T) {
	t.Run("keys", func(t *testing.T) {
		p := aggregate.DefaultPolicy()
		p.MaxKeys = 3
		j := newJobWith(t, p)
		var last []events.Event
		for i := 0; i < 3; i++ {
			j.waitDue()
			key, try := j.send("w1")
			last = j.must(aggregate.Outcome{Key: key, Try: try, Status: 408, Code: "search_timeout"})
		}
		require.Equal(t, []string{"OutcomeClassified", "JobFailed"}, types(last))
		require.Equal(t, aggregate.ReasonKeyBudget, last[1].Data.(events.JobFailed).Reason)
		require.Len(t, j.s.Attempts, 3)
		require.Empty(t, aggregate.Verify(j.log))
	})
	t.Run("age with a definite outcome fails", func(t *testing.T) {
		j := newJob(t)
		key, try := j.send("w1")
		j.now = t0.Add(24*time.Hour - time.Millisecond)
		evs := j.must(aggregate.Outcome{Key: key, Try: try, Status: 503, Code: "service_unavailable"})
		require.Equal(t, aggregate.ReasonAgeBudget, evs[1].Data.(events.JobFailed).Reason)
	})
	t.Run("age counts from a slot ordered ahead", func(t *testing.T) {
		// A command for a slot two days on: waiting for the slot is not
		// trying, so the job buys at its slot and has its whole budget.
		j := &job{t: t, d: aggregate.Decider{Table: aggregate.DefaultTable()}, ids: &seqIDs{}, now: t0}
		sched, err := aggregate.NewSchedule(aggregate.ScheduleCommand{
			Slot: t0.Add(48 * time.Hour).Format(time.RFC3339), Query: "espresso scale", Country: "US", Language: "en", Device: "mobile",
		}, aggregate.DefaultPolicy(), "test")
		require.NoError(t, err)
		j.must(sched)
		j.waitDue()
		require.Equal(t, t0.Add(48*time.Hour), j.now)
		key, try := j.send("w1")
		j.now = j.now.Add(23 * time.Hour)
		evs := j.must(aggregate.Outcome{Key: key, Try: try, Status: 503, Code: "service_unavailable", RequestID: "r1"})
		require.Equal(t, "retry_new_key", evs[0].Data.(events.OutcomeClassified).Action, "within the budget")
		j.now = t0.Add(72 * time.Hour)
		evs = j.must(aggregate.Due{Worker: "w1"})
		require.Equal(t, aggregate.ReasonAgeBudget, evs[0].Data.(events.JobFailed).Reason, "a day after its slot")
		require.Empty(t, aggregate.Verify(j.log))
	})
	t.Run("a re-purchase gets an age budget of its own", func(t *testing.T) {
		j := newJob(t)
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Status: 409, Code: "idempotency_replay_unavailable", RequestID: "r1"})
		j.now = j.s.Settled()
		q := j.s.ReconcileQuery()
		j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs,
			Entries: []events.LedgerEntry{{RequestID: "r1", Key: key, Pages: 1, BilledPages: 1}}})
		require.Equal(t, aggregate.StatusChargedNoResult, j.s.Status)
		j.now = t0.Add(48 * time.Hour) // an operator decides two days on
		j.must(aggregate.AuthorizeRepurchase{By: "ops", Reason: "needed"})
		j.waitDue()
		evs := j.must(aggregate.Due{Worker: "w1"})
		require.IsType(t, events.Sent{}, evs[0].Data, "bought again, not failed for its age")
		require.Empty(t, aggregate.Verify(j.log))
	})
	t.Run("age with an unknown outcome reconciles first", func(t *testing.T) {
		p := aggregate.DefaultPolicy()
		p.MaxAge = events.Duration(5 * time.Minute)
		j := newJobWith(t, p)
		key, try := j.send("w1")
		j.now = t0.Add(4 * time.Minute)
		var evs []events.Event
		for {
			j.must(aggregate.Outcome{Key: key, Try: try, Unknown: "timeout"})
			require.False(t, j.s.NextRunAt.After(t0.Add(5*time.Minute)), "capped at the age deadline")
			j.waitDue()
			evs = j.must(aggregate.Due{Worker: "w1"})
			if _, ok := evs[0].Data.(events.DeadlineReached); ok {
				break
			}
			try = evs[0].Data.(events.Sent).Try
		}
		require.Equal(t, aggregate.ReasonAgeBudget, evs[0].Data.(events.DeadlineReached).Reason)
		j.waitDue()
		q := j.s.ReconcileQuery()
		evs = j.must(aggregate.LedgerAnswer{Keys: q.Keys})
		require.Equal(t, []string{"Reconciled", "JobFailed"}, types(evs))
	})
}

func TestCancel(t *testing.T) {
	j := newJob(t)
	key, try := j.send("w1")
	_, err := j.try(aggregate.Cancel{By: "ops"})
	require.ErrorIs(t, err, aggregate.ErrLeased, "not while a request is in flight")
	j.must(aggregate.Outcome{Key: key, Try: try, Unknown: "connection"})
	evs := j.must(aggregate.Cancel{By: "ops", Reason: "not needed"})
	c := evs[0].Data.(events.JobCancelled)
	require.Equal(t, key, c.Unresolved, "the unresolved key is named for the audit")
	require.Equal(t, aggregate.StatusCancelled, j.s.Status)

	// Sent again (its answer was lost): nothing to write, no error.
	evs, err = j.try(aggregate.Cancel{By: "ops", Reason: "not needed"})
	require.NoError(t, err)
	require.Empty(t, evs)
	_, err = j.try(aggregate.Cancel{})
	require.ErrorIs(t, err, aggregate.ErrTerminal, "a cancellation that says not who cancels is no repeat")
}

// TestApplyDoesNotChangeItsInput: Apply and ApplyAll leave the state
// they are given as it was.
func TestApplyDoesNotChangeItsInput(t *testing.T) {
	j := newJob(t)
	key, try := j.send("w1")
	before := j.s
	evs, err := aggregate.Decide(before, aggregate.Outcome{Key: key, Try: try, Status: 408, Code: "search_timeout", RequestID: "r"}, j.now, j.ids)
	require.NoError(t, err)
	snapshot := aggregate.Fold(j.log)
	after := before
	for _, e := range evs {
		after = aggregate.Apply(after, e)
	}
	require.Equal(t, snapshot, before)
	require.Len(t, after.Attempts, 2)
	require.Equal(t, aggregate.Fold(append(j.log, evs...)), after)

	all := aggregate.ApplyAll(before, evs) // the same, its copies made once
	require.Equal(t, snapshot, before)
	require.Equal(t, after, all)
	require.Equal(t, before, aggregate.ApplyAll(before, nil))
}

// TestA429OnAResendKeepsTheKey: a 429 says the request it answers did not
// run. On a key's first send that settles the key; on a resend after an
// answer that was lost, the earlier send may have run and been billed, so
// the same key goes again (after the wait the API asked for), and its next
// answer still speaks for it.
func TestA429OnAResendKeepsTheKey(t *testing.T) {
	j := newJob(t)
	key, try := j.send("w1")
	j.must(aggregate.Outcome{Key: key, Try: try, Unknown: "timeout"})
	j.waitDue()
	key, try = j.send("w1")
	evs := j.must(aggregate.Outcome{Key: key, Try: try, Status: 429, Code: "rate_limited", RequestID: "r1", RetryAfter: 30 * time.Second})
	require.Equal(t, []string{"OutcomeClassified"}, types(evs))
	o := evs[0].Data.(events.OutcomeClassified)
	require.Equal(t, string(aggregate.ActionRetrySameKey), o.Action)
	require.False(t, o.NextRunAt.Before(j.now.Add(30*time.Second)), "the API's wait is kept")
	cur, _ := j.s.Current()
	require.False(t, cur.Definite, "the key is not settled")

	j.waitDue()
	again, try := j.send("w1")
	require.Equal(t, key, again, "the same key")
	j.must(aggregate.Outcome{Key: again, Try: try, Status: 200, RequestID: "r0", Replayed: true, Result: okResult})
	require.Equal(t, aggregate.StatusSucceeded, j.s.Status)
	require.Empty(t, aggregate.Verify(j.log))
}

// TestRefusedResendAsksTheLedger: a resend of a key whose first answer
// was lost, refused with an error that is not the first execution's
// replayed (a 401 after the token changed: the API refuses before it
// looks the key up), does not fail the job on the spot: the first send
// may have run and been billed. The ledger decides: a charge ends the
// job charged_no_result, none ends it failed with the refusal. A
// replayed failure is the first execution's own and fails at once.
func TestRefusedResendAsksTheLedger(t *testing.T) {
	resent := func(t *testing.T, replayed bool) (*job, string) {
		j := newJob(t)
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Unknown: "connection"})
		j.waitDue()
		_, try = j.send("w1")
		require.Equal(t, 2, try)
		j.must(aggregate.Outcome{Key: key, Try: try, Status: 401, Code: "unauthorized", RequestID: "req_401", Replayed: replayed})
		return j, key
	}
	t.Run("charged", func(t *testing.T) {
		j, key := resent(t, false)
		require.Equal(t, aggregate.StatusReconciling, j.s.Status)
		q := j.s.ReconcileQuery()
		evs := j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs,
			Entries: []events.LedgerEntry{{RequestID: "req_first", Key: key, Pages: 1, BilledPages: 1}}})
		require.Equal(t, []string{"Reconciled"}, types(evs))
		require.Equal(t, aggregate.StatusChargedNoResult, j.s.Status)
		require.Empty(t, aggregate.Verify(j.log))
	})
	t.Run("not charged", func(t *testing.T) {
		j, key := resent(t, false)
		_, err := j.try(aggregate.LedgerAnswer{Keys: []string{key}, RequestIDs: j.s.ReconcileQuery().RequestIDs})
		require.ErrorIs(t, err, aggregate.ErrNotSettled, "the first send's search may still run")
		j.now = j.s.Settled()
		evs := j.must(aggregate.LedgerAnswer{Keys: []string{key}, RequestIDs: j.s.ReconcileQuery().RequestIDs})
		require.Equal(t, []string{"Reconciled", "JobFailed"}, types(evs))
		failed := evs[1].Data.(events.JobFailed)
		require.Equal(t, aggregate.ReasonAPIError, failed.Reason)
		require.Equal(t, 401, failed.Status)
		require.Equal(t, "unauthorized", failed.Code)
		require.Equal(t, aggregate.StatusFailed, j.s.Status)
		require.Len(t, j.s.Attempts, 1, "no new key")
		require.Empty(t, aggregate.Verify(j.log))
	})
	t.Run("replayed", func(t *testing.T) {
		j, _ := resent(t, true)
		require.Equal(t, aggregate.StatusFailed, j.s.Status)
		require.Empty(t, aggregate.Verify(j.log))
	})
}

// TestLedgerBehindTheAPI: the billing ledger is kept apart from the
// replies and may not show a charge yet that the API has spoken of. A key
// answered 409 idempotency_replay_unavailable (billed, response lost) or
// 503 billing_unavailable (ran, billing not settled) is never rotated on
// an empty ledger: the ledger is asked again (every max_delay) until the
// charge shows, or the job's age budget ends, when it fails without
// buying again.
func TestLedgerBehindTheAPI(t *testing.T) {
	replayUnavailable := func(t *testing.T) (*job, string) {
		j := newJob(t)
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Status: 409, Code: "idempotency_replay_unavailable", RequestID: "req_A"})
		j.now = j.s.Settled()
		return j, key
	}
	billingUnresolved := func(t *testing.T) (*job, string) {
		j := newJob(t)
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Status: 503, Code: "billing_unavailable", RequestID: "req_A"})
		for {
			j.waitDue()
			evs := j.must(aggregate.Due{Worker: "w1"})
			sent, ok := evs[0].Data.(events.Sent)
			if !ok {
				break
			}
			j.must(aggregate.Outcome{Key: key, Try: sent.Try, Unknown: "timeout"})
		}
		require.Equal(t, aggregate.StatusReconciling, j.s.Status)
		j.now = j.s.Settled()
		return j, key
	}
	for name, setup := range map[string]func(*testing.T) (*job, string){
		"replay unavailable": replayUnavailable, "billing unavailable": billingUnresolved,
	} {
		t.Run(name+": asked again, then the charge shows", func(t *testing.T) {
			j, key := setup(t)
			q := j.s.ReconcileQuery()
			_, err := j.try(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs})
			var ns *aggregate.NotSettledError
			require.ErrorAs(t, err, &ns)
			require.Equal(t, j.now.Add(j.s.Policy.MaxDelay.D()), ns.Until)
			j.now = ns.Until
			evs := j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs,
				Entries: []events.LedgerEntry{{RequestID: "req_A", Key: key, Pages: 1, BilledPages: 1}}})
			require.Equal(t, []string{"Reconciled"}, types(evs))
			require.Equal(t, aggregate.StatusChargedNoResult, j.s.Status)
			require.Empty(t, aggregate.Verify(j.log))
		})
		t.Run(name+": no charge within the age budget", func(t *testing.T) {
			j, _ := setup(t)
			q := j.s.ReconcileQuery()
			j.now = aggregate.AgeDeadline(j.s.Policy, j.s.AgeStart())
			evs := j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs})
			require.Equal(t, aggregate.StatusFailed, j.s.Status)
			require.Len(t, j.s.Attempts, 1, "never bought again")
			failed := evs[len(evs)-1].Data.(events.JobFailed)
			if name == "replay unavailable" {
				require.Equal(t, aggregate.ReasonChargeNotInLedger, failed.Reason)
			} else {
				require.Equal(t, aggregate.ReasonAgeBudget, failed.Reason)
			}
			require.Empty(t, aggregate.Verify(j.log))
		})
	}
}

// TestChargesWithoutARequestIDAreDistinct: a ledger entry without a
// request id names its charge by everything it holds, not by its key
// alone. Two charges on one key, neither with a request id, are two
// purchases (Verify flags the second); the same entry found twice is one.
func TestChargesWithoutARequestIDAreDistinct(t *testing.T) {
	reconcile := func(t *testing.T, entries func(key string) []events.LedgerEntry) (*job, events.Reconciled) {
		j := newJob(t)
		key, try := j.send("w1")
		j.must(aggregate.Outcome{Key: key, Try: try, Status: 409, Code: "idempotency_replay_unavailable"})
		q := j.s.ReconcileQuery()
		evs := j.must(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs, Entries: entries(key)})
		return j, evs[0].Data.(events.Reconciled)
	}
	t.Run("two charges on one key", func(t *testing.T) {
		j, rec := reconcile(t, func(key string) []events.LedgerEntry {
			return []events.LedgerEntry{
				{Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: t0.Add(time.Minute)},
				{Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: t0.Add(2 * time.Minute)},
			}
		})
		require.Equal(t, 2, rec.Charges)
		require.Len(t, j.s.Accounted, 2)
		// The API charged one key twice: its own double purchase, shown
		// apart from what serpent bought.
		require.Equal(t, aggregate.Purchases{Bought: 1, Doubled: 1}, aggregate.PurchasesOf(j.log))
		require.Empty(t, aggregate.Verify(j.log))
	})
	t.Run("one charge found twice", func(t *testing.T) {
		j, rec := reconcile(t, func(key string) []events.LedgerEntry {
			en := events.LedgerEntry{Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: t0.Add(time.Minute)}
			again := en
			again.At = en.At.In(time.FixedZone("CET", 3600)) // the same instant, told in another zone
			return []events.LedgerEntry{en, again}
		})
		require.Equal(t, 1, rec.Charges)
		require.Equal(t, 1, aggregate.PurchasesOf(j.log).Total())
		require.Empty(t, aggregate.Verify(j.log))
	})
}

// TestA429OnAResendKeepsTheKeyWhateverItsClass: a deployment's rules may
// class a 429 as retryable; on a resend it still keeps the key, since it
// says only that this request did not run.
func TestA429OnAResendKeepsTheKeyWhateverItsClass(t *testing.T) {
	table, err := aggregate.ParseRules([]byte(`[{"status":429,"class":"retryable","action":"retry_new_key"}]`))
	require.NoError(t, err)
	require.Equal(t, aggregate.ActionRetryNewKey, table.Decision(429, "rate_limited", 1, false).Action, "a first send's 429: a new key")
	require.Equal(t, aggregate.ActionRetrySameKey, table.Decision(429, "rate_limited", 2, false).Action, "a resend's 429: the same key")
}
