package consume_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/consume"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/projections/projectionstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
	"github.com/stretchr/testify/require"
)

// live is an engine world on a real JetStream server and the sandbox.
type live struct {
	t      *testing.T
	srv    *natstest.Server
	store  *snats.EventStore
	sb     *sandbox.Server
	client *serper.Client
	policy events.RetryPolicy
}

// testPolicy keeps real-time waits short: quick backoff and a short lease.
func testPolicy() events.RetryPolicy {
	p := aggregate.DefaultPolicy()
	p.BaseDelay = events.Duration(20 * time.Millisecond)
	p.MaxDelay = events.Duration(200 * time.Millisecond)
	p.MinDelay = events.Duration(10 * time.Millisecond)
	p.Lease = events.Duration(1500 * time.Millisecond)
	return p
}

func setupLive(t *testing.T, faults sandbox.Faults) *live {
	t.Helper()
	return setupLiveAckWait(t, faults, time.Second)
}

// setupLiveAckWait is setupLive whose consumers wait ackWait for a sign of
// life from a delivery before they deliver it again.
func setupLiveAckWait(t *testing.T, faults sandbox.Faults, ackWait time.Duration) *live {
	t.Helper()
	ctx := context.Background()
	srv := natstest.RunServer(t)
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{}, ackWait))
	st, err := snats.NewEventStore(ctx, srv.JS, snats.EventStoreOptions{})
	require.NoError(t, err)
	sb := sandbox.New(sandbox.Config{Seed: 1, Faults: faults})
	url, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	client, err := serper.New(serper.Config{BaseURL: url, Token: sandbox.DefaultToken, Timeout: 5 * time.Second, AllowShortTimeout: true})
	require.NoError(t, err)
	t.Cleanup(client.CloseIdleConnections)
	return &live{t: t, srv: srv, store: st, sb: sb, client: client, policy: testPolicy()}
}

func (l *live) engine(name string, hooks engine.Hooks) *engine.Engine {
	eng, err := engine.New(engine.Config{Name: name, Store: l.store, API: l.client,
		Timers: snats.NewTimers(l.srv.JS, nil), Policy: l.policy, Hooks: hooks, ReconcileRetry: 100 * time.Millisecond,
		RetryDelay: 50 * time.Millisecond})
	require.NoError(l.t, err)
	return eng
}

// start runs intake and workers of an engine until the returned stop is
// called.
func (l *live) start(eng *engine.Engine, concurrency int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	intake, err := snats.Consumer(ctx, l.srv.JS, snats.CommandStream, snats.IntakeConsumer)
	require.NoError(l.t, err)
	work, err := snats.Consumer(ctx, l.srv.JS, snats.WorkStream, snats.WorkConsumer)
	require.NoError(l.t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = consume.Intake(ctx, eng, consume.NewRejections(l.srv.JS), intake, consume.Options{Concurrency: 64})
	}()
	go func() {
		defer wg.Done()
		_ = consume.Work(ctx, eng, work, consume.Options{Concurrency: concurrency, Grace: 5 * time.Second})
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	l.t.Cleanup(stop)
	return stop
}

// goRun runs f until the test ends, and waits for it to return before the
// server the test started stops.
func (l *live) goRun(f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f(ctx) }()
	l.t.Cleanup(func() { cancel(); <-done })
}

// waitSettled waits until the named consumers of SERP_COMMANDS have
// every command delivered and acknowledged.
func (l *live) waitSettled(consumers ...string) {
	l.t.Helper()
	ctx := context.Background()
	for _, name := range consumers {
		c, err := l.srv.JS.Consumer(ctx, snats.CommandStream, name)
		require.NoError(l.t, err)
		natstest.WaitFor(l.t, 20*time.Second, func() error {
			ci, err := c.Info(ctx)
			if err != nil || ci.NumAckPending != 0 || ci.NumPending != 0 {
				return fmt.Errorf("%s: commands not all settled: %v", name, err)
			}
			return nil
		})
	}
}

// accounts is serp_accounts, as the engine reads it.
func (l *live) accounts() *snats.KV {
	kv, err := snats.OpenKV(context.Background(), l.srv.JS, snats.AccountsBucket)
	require.NoError(l.t, err)
	return kv
}

func (l *live) publish(payload string) {
	_, err := l.srv.JS.Publish(context.Background(), snats.ScheduleSubject, []byte(payload))
	require.NoError(l.t, err)
}

func cmdFor(i int) string {
	return fmt.Sprintf(`{"slot":"2026-12-02T%02d:%02d:00Z","query":"espresso scale %d","country":"US","language":"en","device":"mobile"}`, i/60%24, i%60, i)
}

func jobFor(t *testing.T, payload string) string {
	c, err := engine.ParseCommand([]byte(payload))
	require.NoError(t, err)
	s, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "")
	require.NoError(t, err)
	return s.JobID
}

// waitTerminal polls until every job is finished.
func (l *live) waitTerminal(jobs []string, timeout time.Duration) map[string]aggregate.State {
	out := map[string]aggregate.State{}
	natstest.WaitFor(l.t, timeout, func() error {
		for _, j := range jobs {
			if _, done := out[j]; done {
				continue
			}
			evs, _, err := l.store.Load(context.Background(), j)
			if err != nil {
				return err
			}
			s := aggregate.Fold(evs)
			if !s.Status.Terminal() {
				return fmt.Errorf("job %s is %q", j, s.Status)
			}
			out[j] = s
		}
		return nil
	})
	return out
}

// chargesPerJob joins the sandbox's charges by key to the jobs' keys.
func (l *live) chargesPerJob(states map[string]aggregate.State) map[string]int {
	perKey := l.sb.Stats().ChargesPerKey
	out := map[string]int{}
	for j, s := range states {
		for _, a := range s.Attempts {
			out[j] += perKey[a.Key]
		}
	}
	return out
}

func (l *live) rejections() map[string]int {
	st, err := l.srv.JS.Stream(context.Background(), snats.RejectStream)
	require.NoError(l.t, err)
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(snats.RejectSubjectPrefix+">"))
	require.NoError(l.t, err)
	out := map[string]int{}
	for subj, n := range info.State.Subjects {
		out[subj] = int(n)
	}
	return out
}

func TestEngineOnJetStream(t *testing.T) {
	t.Parallel()
	l := setupLive(t, sandbox.Faults{DropAfterSearch: 0.1, DropBeforeSearch: 0.05, GatewayPage502: 0.05,
		GatewayPage504: 0.05, Timeout408: 0.05, BillingUnavailable503: 0.05, EarlyExpiry: 0.05, ZeroResults: 0.05})
	l.start(l.engine("w1", engine.Hooks{}), 8)
	l.start(l.engine("w2", engine.Hooks{}), 8)
	const n = 60
	var jobs []string
	for i := 0; i < n; i++ {
		l.publish(cmdFor(i))
		jobs = append(jobs, jobFor(t, cmdFor(i)))
		if i%10 == 0 {
			l.publish(cmdFor(i)) // published twice: still one job
		}
	}
	l.publish(`{"slot":"soon","query":"x","country":"US","language":"en","device":"mobile"}`)
	l.publish(`not json at all`)

	states := l.waitTerminal(jobs, 60*time.Second)
	for j, charges := range l.chargesPerJob(states) {
		require.LessOrEqual(t, charges, 1, "job %s bought %d times", j, charges)
		evs, _, err := l.store.Load(context.Background(), j)
		require.NoError(t, err)
		require.Empty(t, aggregate.Verify(evs))
		require.Equal(t, 1, countType(evs, events.TypeJobScheduled))
	}
	require.Zero(t, l.sb.Stats().BodyViolations)
	natstest.WaitFor(t, 10*time.Second, func() error {
		if r := l.rejections(); r["serp.rejected.invalid_slot"] != 1 || r["serp.rejected.malformed"] != 1 {
			return fmt.Errorf("rejections %v", r)
		}
		return nil
	})
}

func countType(evs []events.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type() == typ {
			n++
		}
	}
	return n
}

// TestCrashResumesOnJetStream: a worker dies after Sent, before the
// request; the delivery comes back after its ack wait, the next worker waits
// out the lease and resends the same key.
func TestCrashResumesOnJetStream(t *testing.T) {
	t.Parallel()
	l := setupLive(t, sandbox.Faults{})
	crashed := make(chan struct{})
	var once sync.Once
	a := l.engine("a", engine.Hooks{AfterClaim: func(string) error {
		once.Do(func() { close(crashed) })
		return engine.ErrCrash
	}})
	stopA := l.start(a, 1)
	l.publish(cmdFor(1))
	job := jobFor(t, cmdFor(1))
	<-crashed
	stopA()

	l.start(l.engine("b", engine.Hooks{}), 1)
	states := l.waitTerminal([]string{job}, 30*time.Second)
	s := states[job]
	require.Equal(t, aggregate.StatusSucceeded, s.Status)
	require.Len(t, s.Attempts, 1, "same key")
	require.Equal(t, 2, s.Sends)
	require.Equal(t, 1, l.chargesPerJob(states)[job])
}

// TestTimersSurviveARestartAndTheSweepRepairsLostOnes.
func TestTimersSurviveARestartAndTheSweepRepairsLostOnes(t *testing.T) {
	l := setupLive(t, sandbox.Faults{})
	eng := l.engine("w", engine.Hooks{})
	ctx := context.Background()
	future := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	out, err := eng.Schedule(ctx, []byte(`{"slot":"`+future+`","query":"later","country":"US","language":"en","device":"mobile"}`), "test")
	require.NoError(t, err)

	// A second job whose timer is lost: the work stream forgets it.
	lost, err := eng.Schedule(ctx, []byte(`{"slot":"`+future+`","query":"lost","country":"US","language":"en","device":"mobile"}`), "test")
	require.NoError(t, err)
	work, err := l.srv.JS.Stream(ctx, snats.WorkStream)
	require.NoError(t, err)
	require.NoError(t, work.Purge(ctx, jetstream.WithPurgeSubject(snats.TimerSubjectPrefix+lost.JobID)))

	l.srv.Restart(t)
	inFlight := []string{out.JobID, lost.JobID}
	rep, err := eng.SweepJobs(ctx, snats.NewTimers(l.srv.JS, nil), engine.JobsOf(inFlight))
	require.NoError(t, err)
	require.Equal(t, engine.SweepReport{Jobs: 2, Live: 2, Rearmed: 1}, rep)
	rep, err = eng.SweepJobs(ctx, snats.NewTimers(l.srv.JS, nil), engine.JobsOf(inFlight))
	require.NoError(t, err)
	require.Zero(t, rep.Rearmed, "a second sweep finds nothing to repair")

	l.start(eng, 2)
	states := l.waitTerminal([]string{out.JobID, lost.JobID}, 30*time.Second)
	for _, s := range states {
		require.Equal(t, aggregate.StatusSucceeded, s.Status)
	}
}

// TestSweepJobsLooksAtTheJobsGiven: SweepJobs re-arms the lost timer of a
// job it is given, leaves a job it is not given alone, and does nothing to a job that has a timer or has finished.
func TestSweepJobsLooksAtTheJobsGiven(t *testing.T) {
	l := setupLive(t, sandbox.Faults{})
	eng := l.engine("w", engine.Hooks{})
	ctx := context.Background()
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	schedule := func(query string) string {
		out, err := eng.Schedule(ctx, []byte(`{"slot":"`+future+`","query":"`+query+`","country":"US","language":"en","device":"mobile"}`), "test")
		require.NoError(t, err)
		return out.JobID
	}
	kept, lost, other := schedule("kept"), schedule("lost"), schedule("other")
	work, err := l.srv.JS.Stream(ctx, snats.WorkStream)
	require.NoError(t, err)
	for _, job := range []string{lost, other} {
		require.NoError(t, work.Purge(ctx, jetstream.WithPurgeSubject(snats.TimerSubjectPrefix+job)))
	}
	armed := func(job string) bool {
		_, err := work.GetLastMsgForSubject(ctx, snats.TimerSubjectPrefix+job)
		return err == nil
	}

	// A job whose log cannot be read, and an id no job can have, are
	// counted and passed over; the jobs after them are still swept.
	corrupt := aggregate.JobID(time.Now(), `{"q":"corrupt"}`)
	_, err = l.srv.JS.Publish(ctx, snats.EventSubjectPrefix+corrupt, []byte("not an event"))
	require.NoError(t, err)

	rep, err := eng.SweepJobs(ctx, snats.NewTimers(l.srv.JS, nil), engine.JobsOf([]string{corrupt, "not a job", kept, lost}))
	require.NoError(t, err)
	require.Equal(t, engine.SweepReport{Jobs: 4, Live: 4, Rearmed: 1, Unusable: 2}, rep)
	require.True(t, armed(lost))
	require.False(t, armed(other), "not given: left to a sweep that is")
	rep, err = eng.SweepJobs(ctx, snats.NewTimers(l.srv.JS, nil), engine.JobsOf([]string{kept, lost}))
	require.NoError(t, err)
	require.Zero(t, rep.Rearmed, "a second sweep finds nothing to repair")

	// A job claimed under a lease that runs (a worker sending it, or one
	// that died after its Sent, before arming its timer) is armed at the
	// lease's end, and counted as held: most such jobs are being sent.
	claim := projectionstest.NewJob(t, projectionstest.IDsFrom(0), "claimed", time.Now())
	claim.Send()
	_, err = l.store.Append(ctx, claim.S.JobID, 0, claim.Log...)
	require.NoError(t, err)
	rep, err = eng.SweepJobs(ctx, snats.NewTimers(l.srv.JS, nil), engine.JobsOf([]string{claim.S.JobID}))
	require.NoError(t, err)
	require.Equal(t, engine.SweepReport{Jobs: 1, Live: 1, Rearmed: 1, Held: 1}, rep)
	require.True(t, armed(claim.S.JobID))

	// A job given as in flight that has finished since has nothing to arm.
	out, err := eng.Schedule(ctx, []byte(`{"slot":"`+time.Now().UTC().Format(time.RFC3339)+`","query":"now","country":"US","language":"en","device":"mobile"}`), "test")
	require.NoError(t, err)
	l.start(eng, 1)
	require.Equal(t, aggregate.StatusSucceeded, l.waitTerminal([]string{out.JobID}, 30*time.Second)[out.JobID].Status)
	rep, err = eng.SweepJobs(ctx, snats.NewTimers(l.srv.JS, nil), engine.JobsOf([]string{out.JobID}))
	require.NoError(t, err)
	require.Equal(t, engine.SweepReport{Jobs: 1, Live: 1}, rep)
	require.False(t, armed(out.JobID))
}

// TestCrashWindowsOnJetStream plays a crash at each point where a process
// may die, on a real JetStream server and the sandbox, and shows that the
// job resumes on another worker and that the sandbox's ledger holds exactly
// one charge for it.
func TestCrashWindowsOnJetStream(t *testing.T) {
	t.Parallel()
	type window struct {
		name   string
		faults sandbox.Faults // in force until the crash
		hooks  func(crash func() error) engine.Hooks
		keys   int // attempt keys the job ends with
		// later: the job's slot is a moment ahead, so it is stored on its
		// own before it is due (a job due now is stored with its claim).
		later bool
	}
	windows := []window{
		{"after the first key is stored, before Sent", sandbox.Faults{},
			func(crash func() error) engine.Hooks {
				return engine.Hooks{AfterSchedule: func(string) error { return crash() }}
			}, 1, true},
		{"after a new key is stored, before its Sent", sandbox.Faults{Timeout408: 1},
			func(crash func() error) engine.Hooks {
				return engine.Hooks{AfterRecord: func(string) error { return crash() }}
			}, 2, false},
		{"after Sent, before the request", sandbox.Faults{},
			func(crash func() error) engine.Hooks {
				return engine.Hooks{AfterClaim: func(string) error { return crash() }}
			}, 1, false},
		{"after the request, before its outcome is stored", sandbox.Faults{},
			func(crash func() error) engine.Hooks {
				return engine.Hooks{AfterSearch: func(string) error { return crash() }}
			}, 1, false},
		{"after an unknown outcome is stored, before the ack", sandbox.Faults{DropAfterSearch: 1},
			func(crash func() error) engine.Hooks {
				return engine.Hooks{AfterRecord: func(string) error { return crash() }}
			}, 1, false},
		{"after the observation is stored, before the ack", sandbox.Faults{},
			func(crash func() error) engine.Hooks {
				return engine.Hooks{AfterRecord: func(string) error { return crash() }}
			}, 1, false},
	}
	for i, w := range windows {
		t.Run(w.name, func(t *testing.T) {
			l := setupLive(t, w.faults)
			crashed := make(chan struct{})
			var once sync.Once
			crash := func() error {
				err := engine.ErrCrash
				once.Do(func() { l.sb.SetFaults(sandbox.Faults{}); close(crashed) })
				return err
			}
			// After its one crash, worker a stays dead: every hook fails.
			stopA := l.start(l.engine("a", w.hooks(crash)), 1)
			cmd := cmdFor(i)
			if w.later {
				slot := time.Now().Add(500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
				cmd = fmt.Sprintf(`{"slot":%q,"query":"espresso grinder","country":"US","language":"en","device":"mobile"}`, slot)
			}
			l.publish(cmd)
			job := jobFor(t, cmd)
			<-crashed
			stopA()

			l.start(l.engine("b", engine.Hooks{}), 1)
			states := l.waitTerminal([]string{job}, 30*time.Second)
			s := states[job]
			require.Equal(t, aggregate.StatusSucceeded, s.Status)
			require.Len(t, s.Attempts, w.keys)
			require.Equal(t, 1, l.chargesPerJob(states)[job], "bought exactly once")
			evs, _, err := l.store.Load(context.Background(), job)
			require.NoError(t, err)
			require.Empty(t, aggregate.Verify(evs))
		})
	}
}
