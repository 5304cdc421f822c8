package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/engine/enginetest"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/stretchr/testify/require"
)

func TestHappyPath(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return success("req_1", false) })
	eng := e.engine("w1", engine.Hooks{})
	job := e.schedule(eng)
	at, armed := e.timers.get(job)
	require.True(t, armed, "a new job's timer is armed")
	require.Equal(t, t0, at)

	s := e.runToEnd(eng, job)
	require.Equal(t, aggregate.StatusSucceeded, s.Status)
	require.Equal(t, []string{"JobScheduled", "AttemptCreated", "Sent", "ObservationStored"}, typesOf(e.log(job)))
	require.Equal(t, "req_1", s.Result.RequestID)
	require.Empty(t, aggregate.Verify(e.log(job)))
}

func TestScheduleIsIdempotentAndRejectsBadInput(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return success("r", false) })
	eng := e.engine("w1", engine.Hooks{})
	ctx := context.Background()
	first, err := eng.Schedule(ctx, command, "test")
	require.NoError(t, err)
	require.True(t, first.Created)
	again, err := eng.Schedule(ctx, []byte(`{"slot":"2026-12-02T15:00:00+01:00","query":" espresso  scale","country":"us","language":"en","device":"mobile"}`), "test")
	require.NoError(t, err)
	require.False(t, again.Created)
	require.Equal(t, first.JobID, again.JobID)
	require.Len(t, e.log(first.JobID), 2, "no second JobScheduled")

	for payload, reason := range map[string]string{
		`{"slot":"2026-12-02T14:00:00Z","query":"q","country":"USA","language":"en","device":"mobile"}`:                "invalid_country",
		`{"slot":"yesterday","query":"q","country":"US","language":"en","device":"mobile"}`:                            "invalid_slot",
		`{"slot":"2026-12-02T14:00:00Z","query":"q","country":"US","language":"en","device":"mobile","colour":"blue"}`: engine.ReasonMalformed,
		`not json`: engine.ReasonMalformed,
		`{"slot":"2026-12-02T14:00:00Z","query":"q","country":"US","language":"en","device":"mobile"} {}`: engine.ReasonMalformed,
		`{"query":"` + string(make([]byte, engine.MaxCommandBytes)) + `"}`:                                engine.ReasonTooLarge,
	} {
		_, err := eng.Schedule(ctx, []byte(payload), "test")
		var rej *engine.RejectError
		require.ErrorAs(t, err, &rej, payload)
		require.Equal(t, reason, rej.Reason)
		require.NotEmpty(t, rej.Error())
	}
}

// TestUnknownOutcomesKeepTheKey: dropped replies and in-progress answers
// resend the same key and body until the API settles it.
func TestUnknownOutcomesKeepTheKey(t *testing.T) {
	e := setup(t, func(_ string, n int) serper.Result {
		switch n {
		case 1:
			return unknown("connection")
		case 2:
			return confirmed(409, "idempotency_in_progress", "r")
		case 3:
			return confirmed(503, "billing_unavailable", "r")
		}
		return success("r", true)
	})
	eng := e.engine("w1", engine.Hooks{})
	job := e.schedule(eng)
	s := e.runToEnd(eng, job)
	require.Equal(t, aggregate.StatusSucceeded, s.Status)
	require.Len(t, s.Attempts, 1)
	require.Equal(t, 4, e.api.sends[s.Attempts[0].Key])
}

func TestConfirmedErrorsRotateTheKey(t *testing.T) {
	var e *env
	e = setup(t, func(key string, n int) serper.Result {
		if len(e.api.sends) == 1 { // the caller holds the lock
			return confirmed(408, "search_timeout", "r1")
		}
		return success("r2", false)
	})
	eng := e.engine("w1", engine.Hooks{})
	job := e.schedule(eng)
	s := e.runToEnd(eng, job)
	require.Equal(t, aggregate.StatusSucceeded, s.Status)
	require.Len(t, s.Attempts, 2)
	require.Len(t, e.api.sends, 2)
	require.Equal(t, e.api.bodies[s.Attempts[0].Key], e.api.bodies[s.Attempts[1].Key], "same body under every key")
}

func TestReplayUnavailableReconciles(t *testing.T) {
	t.Run("charged", func(t *testing.T) {
		e := setup(t, func(key string, n int) serper.Result {
			return confirmed(409, "idempotency_replay_unavailable", "req_A")
		})
		eng := e.engine("w1", engine.Hooks{})
		job := e.schedule(eng)
		key, _ := e.state(job).Current()
		e.api.charge(key.Key, "req_A")
		s := e.runToEnd(eng, job)
		require.Equal(t, aggregate.StatusChargedNoResult, s.Status)
		require.Equal(t, 1, e.api.sendCount(), "no automatic resend after a replay-unavailable answer")

		// An operator buys it again, deliberately.
		e.api.reply = func(string, int) serper.Result { return success("req_B", false) }
		_, err := eng.Repurchase(context.Background(), job, "ops", "needed for the weekly report", nil)
		require.NoError(t, err)
		s = e.runToEnd(eng, job)
		require.Equal(t, aggregate.StatusSucceeded, s.Status)
		require.Empty(t, aggregate.Verify(e.log(job)))
	})
	t.Run("a repeated decision buys once", func(t *testing.T) {
		e := setup(t, func(key string, n int) serper.Result {
			return confirmed(409, "idempotency_replay_unavailable", "req_"+key)
		})
		eng := e.engine("w1", engine.Hooks{})
		job := e.schedule(eng)
		key, _ := e.state(job).Current()
		e.api.charge(key.Key, "req_"+key.Key)
		require.Equal(t, aggregate.StatusChargedNoResult, e.runToEnd(eng, job).Status)

		ctx, seen := context.Background(), 0
		_, err := eng.Repurchase(ctx, job, "ops", "report", &seen)
		require.NoError(t, err)
		again, _ := e.state(job).Current()
		e.api.charge(again.Key, "req_"+again.Key)
		require.Equal(t, aggregate.StatusChargedNoResult, e.runToEnd(eng, job).Status, "lost again")
		require.Equal(t, 2, e.api.sendCount())

		// The first request's answer was lost; the operator's tool asks
		// again with what it was decided on.
		n := len(e.log(job))
		s, err := eng.Repurchase(ctx, job, "ops", "report", &seen)
		require.NoError(t, err)
		require.Equal(t, aggregate.StatusChargedNoResult, s.Status)
		require.Len(t, e.log(job), n, "nothing written")
		require.Equal(t, aggregate.StatusChargedNoResult, e.runToEnd(eng, job).Status)
		require.Equal(t, 2, e.api.sendCount(), "not bought a third time")
		require.Empty(t, aggregate.Verify(e.log(job)))
	})
	t.Run("ledger down, then charged", func(t *testing.T) {
		var e *env
		e = setup(t, func(key string, n int) serper.Result {
			if n == 1 && len(e.api.sends) == 1 {
				// Billed, its reply gone (the caller holds the lock).
				e.api.ledger = append(e.api.ledger, serper.LedgerEntry{RequestID: "req_A", IdempotencyKey: key, Pages: 1, BilledPages: 1})
				return confirmed(409, "idempotency_replay_unavailable", "req_A")
			}
			return success("req_B", false)
		})
		e.api.ledgerE = &serper.LedgerError{Status: 503, Code: "service_unavailable"}
		eng := e.engine("w1", engine.Hooks{})
		job := e.schedule(eng)
		next, err := eng.Step(context.Background(), job, nil)
		require.NoError(t, err)
		require.Equal(t, aggregate.StepWait, next.Step, "a failed look-up waits")
		require.Equal(t, aggregate.StatusReconciling, e.state(job).Status)
		e.api.ledgerE = nil
		s := e.runToEnd(eng, job)
		require.Equal(t, aggregate.StatusChargedNoResult, s.Status)
		require.Len(t, s.Attempts, 1, "never a new key")
		require.Equal(t, 1, e.api.sendCount())
	})
}

// TestUnknownUntilTheDeadline: a key that never gets a definite answer is
// not resent past its deadline; the ledger decides.
func TestUnknownUntilTheDeadline(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return unknown("gateway_page") })
	eng := e.engine("w1", engine.Hooks{})
	job := e.schedule(eng)
	key, _ := e.state(job).Current()
	e.api.charge(key.Key, "req_A")
	s := e.runToEnd(eng, job)
	require.Equal(t, aggregate.StatusChargedNoResult, s.Status)
	for _, ev := range e.log(job) {
		if sent, ok := ev.Data.(events.Sent); ok {
			require.True(t, ev.Time.Before(sent.Deadline))
		}
	}
	require.Empty(t, aggregate.Verify(e.log(job)))
}

// TestCrashWindows plays a crash at each point where a process may die and
// shows that another worker resumes the job with the same key and that the
// observation is bought once.
func TestCrashWindows(t *testing.T) {
	crashOnce := func(fired *bool) func(string) error {
		return func(string) error {
			if *fired {
				return nil
			}
			*fired = true
			return engine.ErrCrash
		}
	}
	for name, hooks := range map[string]func(*bool) engine.Hooks{
		"after Sent, before the request": func(f *bool) engine.Hooks { return engine.Hooks{AfterClaim: crashOnce(f)} },
		"after the reply, before the outcome": func(f *bool) engine.Hooks {
			return engine.Hooks{AfterSearch: crashOnce(f)}
		},
		"after the outcome, before the ack": func(f *bool) engine.Hooks { return engine.Hooks{AfterRecord: crashOnce(f)} },
	} {
		t.Run(name, func(t *testing.T) {
			// The provider: the first execution of a key is billed and
			// replayed after that, as Serper.live does.
			e := setup(t, nil)
			e.api.reply = func(key string, n int) serper.Result {
				if n == 1 {
					e.api.ledger = append(e.api.ledger, serper.LedgerEntry{RequestID: "req_" + key, IdempotencyKey: key, BilledPages: 1})
					return success("req_"+key, false)
				}
				return success("req_"+key, true)
			}
			var fired bool
			a := e.engine("a", hooks(&fired))
			job := e.schedule(a)
			_, err := a.Step(context.Background(), job, nil)
			require.ErrorIs(t, err, engine.ErrCrash)

			// Worker a is gone. b takes the redelivered job.
			b := e.engine("b", engine.Hooks{})
			s := e.runToEnd(b, job)
			require.Equal(t, aggregate.StatusSucceeded, s.Status)
			require.Len(t, s.Attempts, 1, "resumed with the same key")
			require.Len(t, e.api.ledger, 1, "one charge")
			require.Empty(t, aggregate.Verify(e.log(job)))
		})
	}
}

// TestRacingWorkers: several workers step the same job at once; the log lets
// exactly one claim each send.
func TestRacingWorkers(t *testing.T) {
	for _, n := range []int{2, 4} {
		e := setup(t, func(_ string, n int) serper.Result {
			if n < 3 {
				return unknown("timeout")
			}
			return success("r", n > 1)
		})
		engines := make([]*engine.Engine, n)
		for i := range engines {
			engines[i] = e.engine(string(rune('a'+i)), engine.Hooks{})
		}
		job := e.schedule(engines[0])
		for round := 0; round < 50 && !e.state(job).Status.Terminal(); round++ {
			var wg sync.WaitGroup
			nexts := make([]aggregate.Next, n)
			for i, eng := range engines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					next, err := eng.Step(context.Background(), job, nil)
					if err == nil {
						nexts[i] = next
					}
				}()
			}
			wg.Wait()
			for _, nx := range nexts {
				if nx.Step == aggregate.StepWait {
					e.clock.Set(nx.At)
				}
			}
		}
		require.Equal(t, aggregate.StatusSucceeded, e.state(job).Status)
		require.Empty(t, aggregate.Verify(e.log(job)), "no two workers sent at once")
	}
}

func TestCancel(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return unknown("connection") })
	eng := e.engine("w1", engine.Hooks{})
	job := e.schedule(eng)
	_, err := eng.Step(context.Background(), job, nil)
	require.NoError(t, err)
	s, err := eng.Cancel(context.Background(), job, "ops", "not needed")
	require.NoError(t, err)
	require.Equal(t, aggregate.StatusCancelled, s.Status)
	// Again, as after a lost answer: the job's status, nothing written.
	before := len(e.log(job))
	s, err = eng.Cancel(context.Background(), job, "ops", "again")
	require.NoError(t, err)
	require.Equal(t, aggregate.StatusCancelled, s.Status)
	require.Len(t, e.log(job), before)
	next, err := eng.Step(context.Background(), job, nil)
	require.NoError(t, err)
	require.Equal(t, aggregate.StepDone, next.Step)
	_ = time.Second
}

// timedAPI is the scripted provider with a client timeout, as
// serper.Client has.
type timedAPI struct {
	*api
	timeout time.Duration
}

func (a timedAPI) Timeout() time.Duration { return a.timeout }

// TestLateClaimIsNotSent: the ledger is trusted once a claim's lease has
// run out, so a request must leave early enough for its search to end
// within the lease. A claim whose request would leave later (here the
// claim took 21 s to store, with a 2-minute lease and a client that waits
// 100 s) is not sent; the job waits out the lease and claims again.
func TestLateClaimIsNotSent(t *testing.T) {
	for _, tt := range []struct {
		delay time.Duration
		sends int // requests of the first claim
	}{{19 * time.Second, 1}, {21 * time.Second, 0}} {
		t.Run(tt.delay.String(), func(t *testing.T) {
			e := setup(t, func(string, int) serper.Result { return success("r", false) })
			var once sync.Once
			eng, err := engine.New(engine.Config{Name: "w", Store: e.store, API: timedAPI{e.api, 100 * time.Second}, Timers: e.timers,
				Now: e.clock.Now, ReconcileRetry: time.Minute, Hooks: engine.Hooks{AfterClaim: func(string) error {
					once.Do(func() { e.clock.Add(tt.delay) })
					return nil
				}}})
			require.NoError(t, err)
			job := e.schedule(eng)
			_, err = eng.Step(context.Background(), job, nil)
			require.NoError(t, err)
			require.Equal(t, tt.sends, e.api.sendCount())

			s := e.runToEnd(eng, job)
			require.Equal(t, aggregate.StatusSucceeded, s.Status)
			require.Len(t, s.Attempts, 1, "one key")
			require.Equal(t, 1, e.api.sendCount(), "one request")
			require.Equal(t, 2-tt.sends, s.Sends, "a claim again after the late one")
			require.Empty(t, aggregate.Verify(e.log(job)))
		})
	}
}

// flakyLoads is a store whose outcome append fails once with its result
// unknown (it landed) and whose next loads fail; it counts the appends
// and the versions they expected.
type flakyLoads struct {
	*memstore.Store
	mu        sync.Mutex
	failLoads int
	expected  []uint64
}

func (f *flakyLoads) Append(ctx context.Context, jobID string, expected uint64, evs ...events.Event) (uint64, error) {
	f.mu.Lock()
	f.expected = append(f.expected, expected)
	n := len(f.expected)
	f.mu.Unlock()
	v, err := f.Store.Append(ctx, jobID, expected, evs...)
	if n == 3 && err == nil { // the outcome (after the job and its claim): it landed, the answer was lost
		f.mu.Lock()
		f.failLoads = 3
		f.mu.Unlock()
		return 0, fmt.Errorf("%w: the reply was lost", eventstore.ErrUnknownOutcome)
	}
	return v, err
}

func (f *flakyLoads) Load(ctx context.Context, jobID string) ([]events.Event, uint64, error) {
	f.mu.Lock()
	fail := f.failLoads > 0
	if fail {
		f.failLoads--
	}
	f.mu.Unlock()
	if fail {
		return nil, 0, errors.New("the server is unreachable")
	}
	return f.Store.Load(ctx, jobID)
}

// TestRecordingWaitsOutAFailingStore: when recording an outcome fails
// and so does reloading the job, the worker waits StoreRetry between
// tries and keeps the version it had; it does not spin appending at
// version 0.
func TestRecordingWaitsOutAFailingStore(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return success("r", false) })
	fl := &flakyLoads{Store: e.store}
	eng, err := engine.New(engine.Config{Name: "w", Store: fl, API: e.api, Timers: e.timers, Now: e.clock.Now,
		StoreRetry: time.Millisecond, ReconcileRetry: time.Minute})
	require.NoError(t, err)
	job := e.schedule(eng)
	s := e.runToEnd(eng, job)
	require.Equal(t, aggregate.StatusSucceeded, s.Status)
	require.Equal(t, 1, e.api.sendCount())
	fl.mu.Lock()
	defer fl.mu.Unlock()
	// The job, its claim, the outcome; then, after each failed reload, the
	// outcome again at the version it had (refused: it had landed).
	require.Len(t, fl.expected, 3+3, "%v", fl.expected)
	for _, v := range fl.expected[3:] {
		require.Equal(t, fl.expected[2], v, "tried again at the version it had: %v", fl.expected)
	}
}

// TestResultTooLargeForTheLog: a 200 whose result the log cannot hold is
// recorded as an unknown outcome; the key is resent while it may be, then
// reconciled, and the job ends charged_no_result instead of retrying the
// write forever.
func TestResultTooLargeForTheLog(t *testing.T) {
	big := json.RawMessage(`{"requestId":"r","organic":[],"pad":"` + strings.Repeat("x", 8<<10) + `"}`)
	e := setup(t, func(key string, n int) serper.Result {
		return serper.Result{Confirmed: true, Status: 200, RequestID: "r", Replayed: n > 1, Pages: 1, Search: big}
	})
	e.store = memstore.New(memstore.Options{MaxMsgSize: 4096})
	eng := e.engine("w", engine.Hooks{})
	job := e.schedule(eng)
	_, err := eng.Step(context.Background(), job, nil)
	require.NoError(t, err, "the first send's outcome is recorded, as unknown")
	require.Equal(t, 1, e.api.sendCount())
	e.api.charge(e.state(job).Attempts[0].Key, "r") // the search was billed
	s := e.runToEnd(eng, job)
	require.Equal(t, aggregate.StatusChargedNoResult, s.Status)
	require.Len(t, s.Attempts, 1, "never a second key")
	require.Empty(t, aggregate.Verify(e.log(job)))
}

// TestJobOfAMissingAccountWaitsThenFails: a job whose API account this
// engine does not have (it was removed from the configuration after the
// job was taken in) writes nothing and waits a minute at a time, not a
// second; once its age budget is spent it fails, which needs no account.
func TestJobOfAMissingAccountWaitsThenFails(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return success("r", false) })
	with, err := engine.New(engine.Config{Name: "w", Store: e.store, API: e.api, Timers: e.timers, Now: e.clock.Now,
		Accounts: map[string]engine.API{"default": e.api, "acme": e.api}})
	require.NoError(t, err)
	out, err := with.Schedule(context.Background(), []byte(`{"slot":"2026-12-02T14:00:00Z","query":"q","country":"US","language":"en","device":"mobile","account":"acme"}`), "test")
	require.NoError(t, err)
	job := out.JobID
	before := len(e.log(job))

	// An engine with no accounts at all (serpent run without --accounts)
	// has the default one alone, and does not buy with its token either.
	bare, err := engine.New(engine.Config{Name: "w", Store: e.store, API: e.api, Timers: e.timers, Now: e.clock.Now})
	require.NoError(t, err)
	without, err := engine.New(engine.Config{Name: "w", Store: e.store, API: e.api, Timers: e.timers, Now: e.clock.Now,
		Accounts: map[string]engine.API{"default": e.api}})
	require.NoError(t, err)
	for _, eng := range []*engine.Engine{bare, without} {
		next, err := eng.Step(context.Background(), job, nil)
		require.NoError(t, err)
		require.Equal(t, aggregate.StepWait, next.Step)
		require.Equal(t, e.clock.Now().Add(time.Minute), next.At)
		require.Len(t, e.log(job), before, "nothing written")
		require.Zero(t, e.api.sendCount())
	}

	e.clock.Add(25 * time.Hour)
	next, err := without.Step(context.Background(), job, nil)
	require.NoError(t, err)
	require.Equal(t, aggregate.StepDone, next.Step)
	s := e.state(job)
	require.Equal(t, aggregate.StatusFailed, s.Status)
	require.Zero(t, e.api.sendCount())
	require.Empty(t, aggregate.Verify(e.log(job)))
}

// TestUnsettledJobOfAMissingAccountWaitsForIt: a job whose key's outcome
// is unknown can be settled only by its account's billing ledger: an
// engine without that account (one without --accounts, say, upgraded from
// a version that bought such jobs with the default token) neither sends
// it again nor asks another ledger, past its age budget too. Once the
// account is configured (here as the default API, by name), it is
// reconciled and ends.
func TestUnsettledJobOfAMissingAccountWaitsForIt(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return unknown("timeout") })
	with, err := engine.New(engine.Config{Name: "w", Store: e.store, API: e.api, Timers: e.timers, Now: e.clock.Now,
		ReconcileRetry: time.Minute, Accounts: map[string]engine.API{"default": e.api, "acme": e.api}})
	require.NoError(t, err)
	out, err := with.Schedule(context.Background(), []byte(`{"slot":"2026-12-02T14:00:00Z","query":"q","country":"US","language":"en","device":"mobile","account":"acme"}`), "test")
	require.NoError(t, err)
	job := out.JobID
	_, err = with.Step(context.Background(), job, nil)
	require.NoError(t, err)
	require.Equal(t, 1, e.api.sendCount(), "sent once; outcome unknown")

	bare, err := engine.New(engine.Config{Name: "w", Store: e.store, API: e.api, Timers: e.timers, Now: e.clock.Now,
		ReconcileRetry: time.Minute})
	require.NoError(t, err)
	s := e.state(job)
	end := aggregate.AgeDeadline(s.Policy, s.AgeStart()).Add(time.Hour)
	for e.clock.Now().Before(end) {
		next, err := bare.Step(context.Background(), job, nil)
		require.NoError(t, err)
		require.Equal(t, aggregate.StepWait, next.Step)
		e.clock.Set(next.At)
	}
	require.Equal(t, aggregate.StatusReconciling, e.state(job).Status)
	require.Equal(t, 1, e.api.sendCount(), "not sent again")
	require.Zero(t, e.api.lookups, "no other account's ledger asked")

	s = e.runToEnd(with, job)
	require.True(t, s.Status.Terminal(), "settled by its own ledger: %s", s.Status)
	require.Equal(t, 1, e.api.lookups)
	require.Empty(t, aggregate.Verify(e.log(job)))
}

// behind is a store whose loads come from a replica that has not seen the
// job yet, while its leader has.
type behind struct{ *memstore.Store }

func (b behind) Load(context.Context, string) ([]events.Event, uint64, error) { return nil, 0, nil }

func (b behind) LeaderVersion(ctx context.Context, jobID string) (uint64, error) {
	_, v, err := b.Store.Load(ctx, jobID)
	return v, err
}

// TestStaleLoadDoesNotDropTheWakeUp: a wake-up whose job loads as missing
// (a replica behind the leader answered) is not dropped as a wake-up of
// no job: the leader is asked, and the step fails so the delivery comes
// again.
func TestStaleLoadDoesNotDropTheWakeUp(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return success("r", false) })
	job := e.schedule(e.engine("w", engine.Hooks{}))
	eng, err := engine.New(engine.Config{Name: "w", Store: behind{e.store}, API: e.api, Timers: e.timers, Now: e.clock.Now})
	require.NoError(t, err)
	_, err = eng.Step(context.Background(), job, nil)
	require.Error(t, err)
	require.NotErrorIs(t, err, engine.ErrNoSuchJob)
	require.ErrorContains(t, err, "behind the log")

	_, err = eng.Step(context.Background(), "no-such-job", nil)
	require.ErrorIs(t, err, engine.ErrNoSuchJob, "the leader agrees there is none")
}

// TestUnsentClaimKeepsItsBudget: a claim stored but not sent (it grew too
// old) keeps the page its budget reserved: the key's next send counts as a
// resend, which the budget does not hold back, and it may buy.
func TestUnsentClaimKeepsItsBudget(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return success("r", false) })
	kv := enginetest.NewBucket()
	ctx := context.Background()
	require.NoError(t, engine.SetLimits(ctx, kv, "", accounts.Limits{DailyPages: 5}))
	lim, err := engine.NewLimiter(ctx, kv, "w", 2*time.Minute, e.clock.Now, nil)
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	natstest.WaitFor(t, 10*time.Second, func() error {
		if lim.Limits("").DailyPages != 5 {
			return fmt.Errorf("limits not seen yet")
		}
		return nil
	})
	var once sync.Once
	eng, err := engine.New(engine.Config{Name: "w", Store: e.store, API: timedAPI{e.api, 100 * time.Second}, Timers: e.timers,
		Limiter: lim, Now: e.clock.Now, ReconcileRetry: time.Minute, Hooks: engine.Hooks{AfterClaim: func(string) error {
			once.Do(func() { e.clock.Add(21 * time.Second) }) // too late to send
			return nil
		}}})
	require.NoError(t, err)
	spent := func() int {
		st, err := engine.AccountStatuses(ctx, kv, e.clock.Now())
		require.NoError(t, err)
		for _, a := range st {
			if a.Account == "default" {
				return a.SpentToday.Pages
			}
		}
		return 0
	}
	job := e.schedule(eng)
	_, err = eng.Step(ctx, job, nil)
	require.NoError(t, err)
	require.Zero(t, e.api.sendCount(), "not sent")
	require.Equal(t, 1, spent(), "its page stays reserved")
	s := e.runToEnd(eng, job)
	require.Equal(t, aggregate.StatusSucceeded, s.Status)
	require.Equal(t, 1, e.api.sendCount())
	require.Equal(t, 1, spent(), "one page bought, one counted")
}

// lostReconciliation is a store whose append of a reconciliation lands but
// answers with its outcome unknown.
type lostReconciliation struct {
	*memstore.Store
}

func (l lostReconciliation) Append(ctx context.Context, jobID string, expected uint64, evs ...events.Event) (uint64, error) {
	v, err := l.Store.Append(ctx, jobID, expected, evs...)
	if _, ok := evs[0].Data.(events.Reconciled); ok && err == nil {
		return 0, fmt.Errorf("%w: the reply was lost", eventstore.ErrUnknownOutcome)
	}
	return v, err
}

// TestLostReconciliationAnswerGoesOn: a reconciliation written whose
// answer was lost is not a failed ledger look-up: the worker reads the job
// again and goes on (here: sends the new key the ledger's "no charge"
// allowed) instead of waiting ReconcileRetry.
func TestLostReconciliationAnswerGoesOn(t *testing.T) {
	first := ""
	e := setup(t, func(key string, n int) serper.Result {
		if first == "" || first == key {
			first = key
			return serper.Result{Unknown: serper.UnknownTimeout} // until the key's deadline
		}
		return success("r2", false)
	})
	eng, err := engine.New(engine.Config{Name: "w", Store: lostReconciliation{e.store}, API: e.api, Timers: e.timers,
		Now: e.clock.Now, ReconcileRetry: time.Hour})
	require.NoError(t, err)
	job := e.schedule(eng)
	start := e.clock.Now()
	s := e.runToEnd(eng, job)
	require.Equal(t, aggregate.StatusSucceeded, s.Status)
	require.Len(t, s.Attempts, 2, "the ledger showed no charge: a new key")
	require.Less(t, e.clock.Now().Sub(start), time.Hour, "no ReconcileRetry wait: %v", e.clock.Now().Sub(start))
	require.Empty(t, aggregate.Verify(e.log(job)))
}
