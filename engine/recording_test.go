package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/serper"
	"github.com/stretchr/testify/require"
)

// TestChargeNeverInLedgerFailsTheJob: the API said the key was billed (409
// idempotency_replay_unavailable) but the billing ledger never shows the
// charge. At the job's age budget the decider fails the job
// (charge_not_in_ledger) with a JobFailed alone, no Reconciled before it;
// the worker must record that without panicking.
func TestChargeNeverInLedgerFailsTheJob(t *testing.T) {
	e := setup(t, func(string, int) serper.Result {
		return confirmed(409, "idempotency_replay_unavailable", "req_A")
	})
	eng := e.engine("w1", engine.Hooks{})
	job := e.schedule(eng)
	ctx := context.Background()

	// Send, learn the charge's response is lost, wait for the last
	// search to settle, ask the ledger: nothing there yet.
	for i := 0; i < 10 && e.api.lookups == 0; i++ {
		next, err := eng.Step(ctx, job, nil)
		require.NoError(t, err)
		require.Equal(t, aggregate.StepWait, next.Step)
		e.clock.Set(next.At)
	}
	require.Equal(t, 1, e.api.lookups, "the ledger was asked")
	require.Equal(t, aggregate.StatusReconciling, e.state(job).Status)

	// The charge never shows; the job's age budget ends.
	s := e.state(job)
	e.clock.Set(aggregate.AgeDeadline(s.Policy, s.AgeStart()).Add(time.Second))
	var next aggregate.Next
	require.NotPanics(t, func() {
		var err error
		next, err = eng.Step(ctx, job, nil)
		require.NoError(t, err)
	})
	require.Equal(t, aggregate.StepDone, next.Step)
	s = e.state(job)
	require.Equal(t, aggregate.StatusFailed, s.Status)
	require.Equal(t, aggregate.ReasonChargeNotInLedger, s.Failure.Reason)
	require.Equal(t, 1, e.api.sendCount(), "never bought again")
}

// TestConfirmedFailureWithALongMessageFailsTheJob: a confirmed API error
// ends the job for the caller (the retry contract's last row), whatever
// the length of the message the API put in its envelope.
func TestConfirmedFailureWithALongMessageFailsTheJob(t *testing.T) {
	long := strings.Repeat("x", 8<<10)
	e := setup(t, func(key string, n int) serper.Result {
		return serper.Result{Confirmed: true, Status: 400, Code: "invalid_request", RequestID: "req_" + key[:8],
			Message: long, Replayed: n > 1}
	})
	e.store = memstore.New(memstore.Options{MaxMsgSize: 4096})
	eng := e.engine("w", engine.Hooks{})
	job := e.schedule(eng)
	_, err := eng.Step(context.Background(), job, nil)
	require.NoError(t, err, "the API's refusal is recorded")
	s := e.state(job)
	require.Equal(t, aggregate.StatusFailed, s.Status)
	require.Equal(t, aggregate.ReasonAPIError, s.Failure.Reason)
	require.Equal(t, 1, e.api.sendCount())
}

// TestLostReplyOfARecordedOutcomeIsNotRecordedTwice: the write of a
// resend's 429 (rate limited: the key goes again) lands but its reply is
// lost; reading the job again shows it, and it is not written a second
// time.
func TestLostReplyOfARecordedOutcomeIsNotRecordedTwice(t *testing.T) {
	e := setup(t, func(key string, n int) serper.Result {
		if n == 1 {
			return unknown("connection")
		}
		if n == 2 {
			return serper.Result{Confirmed: true, Status: 429, Code: "rate_limited", RequestID: "req_2"}
		}
		return success("req_3", false)
	})
	var mu sync.Mutex
	appends := 0
	e.store = memstore.New(memstore.Options{Hooks: memstore.Hooks{AfterAppend: func(string) error {
		mu.Lock()
		defer mu.Unlock()
		appends++
		if appends == 5 { // the job, claim 1, outcome 1, claim 2, outcome 2
			return fmt.Errorf("%w: no reply", eventstore.ErrUnknownOutcome)
		}
		return nil
	}}})
	eng, err := engine.New(engine.Config{Name: "w", Store: e.store, API: e.api, Timers: e.timers, Now: e.clock.Now,
		StoreRetry: time.Millisecond, ReconcileRetry: time.Minute})
	require.NoError(t, err)
	job := e.schedule(eng)
	s := e.runToEnd(eng, job)
	require.Equal(t, aggregate.StatusSucceeded, s.Status)
	n := 0
	for _, ev := range e.log(job) {
		if o, ok := ev.Data.(events.OutcomeClassified); ok && o.Try == 2 {
			n++
		}
	}
	require.Equal(t, 1, n, "one outcome of try 2: %v", typesOf(e.log(job)))
}
