package consume_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
	"github.com/stretchr/testify/require"
)

// metered is the sandbox behind a handler that sees every search request:
// how many run at once, and when each started.
type metered struct {
	h      http.Handler
	mu     sync.Mutex
	now    int
	peak   int
	starts []time.Time
	status map[int]int
	first  map[int]time.Time // when each status was first answered
}

func (m *metered) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/search" {
		m.h.ServeHTTP(w, r)
		return
	}
	m.mu.Lock()
	m.now++
	m.peak = max(m.peak, m.now)
	m.starts = append(m.starts, time.Now())
	m.mu.Unlock()
	rec := &statusRecorder{ResponseWriter: w, status: 200}
	m.h.ServeHTTP(rec, r)
	m.mu.Lock()
	m.now--
	m.status[rec.status]++
	if _, ok := m.first[rec.status]; !ok {
		m.first[rec.status] = time.Now()
	}
	m.mu.Unlock()
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) { s.status = code; s.ResponseWriter.WriteHeader(code) }

// Hijack keeps the sandbox's dropped-connection faults working.
func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return s.ResponseWriter.(http.Hijacker).Hijack()
}

// maxInWindow is the most requests that started within any span d.
func (m *metered) maxInWindow(d time.Duration) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	starts := append([]time.Time(nil), m.starts...)
	sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
	best := 0
	for i := range starts {
		j := i
		for j < len(starts) && starts[j].Sub(starts[i]) < d {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

// setupLimited is a live world whose sandbox is metered, and a limiter per
// engine.
func setupLimited(t *testing.T, cfg sandbox.Config) (*live, *metered) {
	t.Helper()
	return setupLimitedAckWait(t, cfg, time.Second)
}

// setupLimitedAckWait is setupLimited whose consumers wait ackWait for a
// sign of life from a delivery before they deliver it again.
func setupLimitedAckWait(t *testing.T, cfg sandbox.Config, ackWait time.Duration) (*live, *metered) {
	t.Helper()
	l := setupLiveAckWait(t, sandbox.Faults{}, ackWait)
	cfg.Seed = 1
	sb := sandbox.New(cfg)
	m := &metered{h: sb, status: map[int]int{}, first: map[int]time.Time{}}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = sb.Close() })
	client, err := serper.New(serper.Config{BaseURL: srv.URL, Token: sandbox.DefaultToken, Timeout: 5 * time.Second, AllowShortTimeout: true})
	require.NoError(t, err)
	t.Cleanup(client.CloseIdleConnections)
	l.sb, l.client = sb, client
	return l, m
}

func (l *live) limitedEngine(name string, starve time.Duration) *engine.Engine {
	lim, err := engine.NewLimiter(context.Background(), l.accounts(), name, l.policy.Lease.D(), nil, nil)
	require.NoError(l.t, err)
	l.t.Cleanup(lim.Close)
	eng, err := engine.New(engine.Config{Name: name, Store: l.store, API: l.client, Timers: snats.NewTimers(l.srv.JS, nil),
		Policy: l.policy, Limiter: lim, StarveAfter: starve, ReconcileRetry: 100 * time.Millisecond})
	require.NoError(l.t, err)
	return eng
}

func (l *live) setLimits(lim accounts.Limits) {
	require.NoError(l.t, engine.SetLimits(context.Background(), l.accounts(), "", lim))
}

// TestLimitsHoldAcrossWorkers: three engines, each with its own limiter and
// eight slots, share one account capped at two searches in flight and five
// a second (burst two): the sandbox never sees more.
func TestLimitsHoldAcrossWorkers(t *testing.T) {
	t.Parallel()
	l, m := setupLimited(t, sandbox.Config{SearchTime: 100 * time.Millisecond})
	l.setLimits(accounts.Limits{MaxInFlight: 2, RatePerSec: 5, Burst: 2})
	for _, name := range []string{"a", "b", "c"} {
		l.start(l.limitedEngine(name, time.Minute), 8)
	}
	var jobs []string
	for i := 0; i < 15; i++ {
		l.publish(cmdFor(i))
		jobs = append(jobs, jobFor(t, cmdFor(i)))
	}
	states := l.waitTerminal(jobs, time.Minute)
	for _, s := range states {
		require.Equal(t, aggregate.StatusSucceeded, s.Status)
	}
	m.mu.Lock()
	peak := m.peak
	m.mu.Unlock()
	require.LessOrEqual(t, peak, 2, "searches in flight over every worker")
	require.LessOrEqual(t, m.maxInWindow(time.Second), 5+2, "searches started in any second")
}

// TestDailyBudget: a spent budget makes new purchases wait, lets resends of
// a key go on, fails nothing; raising it lets the waiting jobs through.
func TestDailyBudget(t *testing.T) {
	t.Parallel()
	l, _ := setupLimited(t, sandbox.Config{})
	l.setLimits(accounts.Limits{DailyPages: 3})
	eng := l.limitedEngine("w", time.Minute)
	ctx := context.Background()

	// Job 0's first send is lost after it ran: unknown, it may have
	// bought, so its page stays counted and its resend must go on even
	// when the budget is spent.
	l.sb.SetFaults(sandbox.Faults{DropAfterSearch: 1})
	stop := l.start(eng, 4)
	l.publish(cmdFor(0))
	first := jobFor(t, cmdFor(0))
	natstest.WaitFor(t, 20*time.Second, func() error {
		evs, _, err := l.store.Load(ctx, first)
		if err != nil || countType(evs, events.TypeOutcomeClassified) == 0 {
			return fmt.Errorf("no outcome yet")
		}
		return nil
	})
	stop()
	l.sb.SetFaults(sandbox.Faults{})
	l.start(eng, 4)
	jobs := []string{first}
	for i := 1; i < 6; i++ {
		l.publish(cmdFor(i))
		jobs = append(jobs, jobFor(t, cmdFor(i)))
	}
	waitCounts := func(succeeded, waiting int) func() error {
		return func() error {
			n, w := 0, 0
			for _, j := range jobs {
				evs, _, err := l.store.Load(ctx, j)
				if err != nil {
					return err
				}
				s := aggregate.Fold(evs)
				require.NotEqual(t, aggregate.StatusFailed, s.Status, "a limit never fails a job")
				switch {
				case s.Status == aggregate.StatusSucceeded:
					n++
				case s.Sends == 0:
					w++
				}
			}
			if n != succeeded || w != waiting {
				return fmt.Errorf("%d succeeded, %d waiting", n, w)
			}
			return nil
		}
	}
	// Job 0 (its resend) and two new purchases fit in three pages.
	natstest.WaitFor(t, 30*time.Second, waitCounts(3, 3))
	st, err := engine.AccountStatuses(ctx, l.accounts(), time.Now())
	require.NoError(t, err)
	require.Len(t, st, 1)
	require.Equal(t, 3, st[0].SpentToday.Pages)
	natstest.WaitFor(t, 10*time.Second, func() error {
		st, err := engine.AccountStatuses(ctx, l.accounts(), time.Now())
		if err != nil || len(st) != 1 || st[0].WaitingWhy[engine.WaitBudget] != 3 {
			return fmt.Errorf("waiting: %+v %v", st, err)
		}
		return nil
	})

	l.setLimits(accounts.Limits{DailyPages: 10})
	natstest.WaitFor(t, 30*time.Second, waitCounts(6, 0))
	states := l.waitTerminal(jobs, time.Second)
	for j, c := range l.chargesPerJob(states) {
		require.Equal(t, 1, c, "job %s", j)
	}
}

// TestRateLimitStorm: the API answers 429 to everything for a while; the
// whole account slows down, then every job is bought exactly once.
func TestRateLimitStorm(t *testing.T) {
	t.Parallel()
	l, m := setupLimited(t, sandbox.Config{RetryAfter: time.Second, Faults: sandbox.Faults{RateLimited429: 1}})
	l.setLimits(accounts.Limits{MaxInFlight: 4})
	for _, name := range []string{"a", "b"} {
		l.start(l.limitedEngine(name, time.Minute), 8)
	}
	var jobs []string
	for i := 0; i < 12; i++ {
		l.publish(cmdFor(i))
		jobs = append(jobs, jobFor(t, cmdFor(i)))
	}
	natstest.WaitFor(t, 20*time.Second, func() error {
		st, err := engine.AccountStatuses(context.Background(), l.accounts(), time.Now())
		if err != nil || len(st) == 0 || st[0].PausedUntil == nil {
			return fmt.Errorf("not paused yet")
		}
		return nil
	})
	calm := make(chan time.Time, 1)
	time.AfterFunc(1500*time.Millisecond, func() { l.sb.SetFaults(sandbox.Faults{}); calm <- time.Now() })
	states := l.waitTerminal(jobs, time.Minute)
	l.requireBoughtOnce(t, states)
	// While paused the account sends nothing: each second of the storm
	// (Retry-After 1s) meets at most one round of the in-flight cap, where
	// twelve jobs backing off each on its own would keep hitting it.
	end := <-calm
	m.mu.Lock()
	defer m.mu.Unlock()
	rounds := int(end.Sub(m.first[429])/time.Second) + 2
	require.LessOrEqual(t, m.status[429], 4*rounds, "%d answers of 429 in %d rounds", m.status[429], rounds)
}

// TestPriority: with one search at a time, high-priority jobs go first; the
// normal ones are not starved.
func TestPriority(t *testing.T) {
	l, _ := setupLimited(t, sandbox.Config{SearchTime: 50 * time.Millisecond})
	l.setLimits(accounts.Limits{MaxInFlight: 1})
	ctx := context.Background()
	eng := l.limitedEngine("w", 3*time.Second)
	var jobs []string
	var high []string
	for i := 0; i < 12; i++ {
		p := fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":"prio %d","country":"US","language":"en","device":"mobile","priority":"%s"}`,
			i, map[bool]string{true: "high", false: "normal"}[i%2 == 1])
		out, err := eng.Schedule(ctx, []byte(p), "test")
		require.NoError(t, err)
		jobs = append(jobs, out.JobID)
		if i%2 == 1 {
			high = append(high, out.JobID)
		}
	}
	l.start(eng, 12)
	states := l.waitTerminal(jobs, time.Minute)
	type done struct {
		job string
		at  time.Time
	}
	var order []done
	for j, s := range states {
		require.Equal(t, aggregate.StatusSucceeded, s.Status, "normal jobs are not starved")
		order = append(order, done{j, s.UpdatedAt})
	}
	sort.Slice(order, func(i, j int) bool { return order[i].at.Before(order[j].at) })
	rank := map[string]int{}
	for i, d := range order {
		rank[d.job] = i
	}
	highSum, normalSum := 0, 0
	for _, j := range jobs {
		if contains(high, j) {
			highSum += rank[j]
		} else {
			normalSum += rank[j]
		}
	}
	require.Less(t, highSum, normalSum, "high-priority jobs finish first on the whole")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestPauseParksWakeUps: jobs woken while their account is paused wait
// in the engine's lot for the account, their wake-ups kept alive past the
// consumer's ack wait, instead of each arming a timer or
// coming back again and again: the pause writes nothing to SERP_WORK, each
// wake-up is delivered once, and each job is bought once when it ends.
func TestPauseParksWakeUps(t *testing.T) {
	t.Parallel()
	// An ack wait of 3 s: a busy machine may delay a sign of life by
	// a second or more.
	l, m := setupLimitedAckWait(t, sandbox.Config{}, 3*time.Second)
	ctx := context.Background()
	eng := l.limitedEngine("a", time.Minute)
	pauser := l.pauser(t)
	var jobs []string
	for i := 0; i < 5; i++ {
		out, err := eng.Schedule(ctx, []byte(cmdFor(i)), "test") // the job, and its wake-up now
		require.NoError(t, err)
		jobs = append(jobs, out.JobID)
	}
	// Paused once the wake-ups are written: the pause outlasts the
	// engine's start and the consumer's ack wait.
	pauser.Pause(ctx, "", time.Now().Add(6*time.Second), "test")
	waitPaused(t, l)
	written := l.timersWritten(t)

	l.start(eng, 8)
	states := l.waitTerminal(jobs, time.Minute)
	l.requireBoughtOnce(t, states)
	m.mu.Lock()
	require.Zero(t, m.status[429])
	m.mu.Unlock()
	require.Equal(t, written, l.timersWritten(t), "no timer written while the account was paused")
	cons, err := l.srv.JS.Consumer(ctx, snats.WorkStream, snats.WorkConsumer)
	require.NoError(t, err)
	ci, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(len(jobs)), ci.Delivered.Consumer, "each wake-up delivered once")
}

// TestPauseParksCommands: commands of new jobs that come while their
// account is paused wait in the engine's lot with their jobs: however many
// they are, the pause writes no timer, each command is delivered once and
// acknowledged once its job went on after the pause, and each job is
// bought once.
func TestPauseParksCommands(t *testing.T) {
	t.Parallel()
	l, m := setupLimitedAckWait(t, sandbox.Config{}, 3*time.Second) // as in TestPauseParksWakeUps
	ctx := context.Background()
	pauser := l.pauser(t)
	eng := l.limitedEngine("a", time.Minute)
	l.start(eng, 8)
	pauser.Pause(ctx, "", time.Now().Add(6*time.Second), "test")
	waitPaused(t, l)
	written := l.timersWritten(t)

	const n = 40
	var jobs []string
	for i := 0; i < n; i++ {
		l.publish(cmdFor(i))
		jobs = append(jobs, jobFor(t, cmdFor(i)))
	}
	states := l.waitTerminal(jobs, time.Minute)
	l.requireBoughtOnce(t, states)
	m.mu.Lock()
	require.Zero(t, m.status[429])
	m.mu.Unlock()
	require.Equal(t, written, l.timersWritten(t), "no timer written for the jobs the pause held")
	l.waitSettled(snats.IntakeConsumer)
	cons, err := l.srv.JS.Consumer(ctx, snats.CommandStream, snats.IntakeConsumer)
	require.NoError(t, err)
	ci, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(n), ci.Delivered.Consumer, "each command delivered once")
}

// TestParkedCommandsOutliveTheirWorker: a worker parks the commands of new
// jobs while their account is paused and dies. The commands were never
// acknowledged, so another worker gets them and buys each job once; no
// timer was written for them.
func TestParkedCommandsOutliveTheirWorker(t *testing.T) {
	t.Parallel()
	l, _ := setupLimited(t, sandbox.Config{})
	ctx := context.Background()
	pauser := l.pauser(t)
	a := l.limitedEngine("a", time.Minute)
	stopA := l.start(a, 8)
	pauser.Pause(ctx, "", time.Now().Add(4*time.Second), "test")
	waitPaused(t, l)
	written := l.timersWritten(t)

	var jobs []string
	for i := 0; i < 5; i++ {
		l.publish(cmdFor(i))
		jobs = append(jobs, jobFor(t, cmdFor(i)))
	}
	natstest.WaitFor(t, 10*time.Second, func() error {
		if n := a.HeldCommands(); n < len(jobs) {
			return fmt.Errorf("a holds %d of %d commands", n, len(jobs))
		}
		return nil
	})
	stopA() // a dies with every command parked
	cons, err := l.srv.JS.Consumer(ctx, snats.CommandStream, snats.IntakeConsumer)
	require.NoError(t, err)
	ci, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, ci.AckFloor.Consumer, "a acknowledged none of them")

	l.start(l.limitedEngine("b", time.Minute), 8)
	states := l.waitTerminal(jobs, time.Minute)
	l.requireBoughtOnce(t, states)
	require.Equal(t, written, l.timersWritten(t), "no timer written for the parked jobs")
	l.waitSettled(snats.IntakeConsumer)
}

// pauser is a limiter of its own, which pauses the accounts every engine
// shares.
func (l *live) pauser(t *testing.T) *engine.Limiter {
	t.Helper()
	p, err := engine.NewLimiter(context.Background(), l.accounts(), "pauser", l.policy.Lease.D(), nil, nil)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// timersWritten is SERP_WORK's last sequence: every timer ever written.
func (l *live) timersWritten(t *testing.T) uint64 {
	t.Helper()
	work, err := l.srv.JS.Stream(context.Background(), snats.WorkStream)
	require.NoError(t, err)
	info, err := work.Info(context.Background())
	require.NoError(t, err)
	return info.State.LastSeq
}

// requireBoughtOnce checks that every job of states succeeded and was
// bought once.
func (l *live) requireBoughtOnce(t *testing.T, states map[string]aggregate.State) {
	t.Helper()
	for j, c := range l.chargesPerJob(states) {
		require.Equal(t, aggregate.StatusSucceeded, states[j].Status)
		require.Equal(t, 1, c, "job %s bought once", j)
	}
}

// waitPaused waits until the default account's pause is in the bucket.
func waitPaused(t *testing.T, l *live) {
	t.Helper()
	natstest.WaitFor(t, 10*time.Second, func() error {
		st, err := engine.AccountStatuses(context.Background(), l.accounts(), time.Now())
		if err != nil || len(st) == 0 || st[0].PausedUntil == nil {
			return fmt.Errorf("not paused yet")
		}
		return nil
	})
}

// TestHeldDeliveriesOutliveTheirWorker: a worker parks its throttled
// wake-ups while their account is paused and then dies. They were never
// acknowledged, so another worker gets them and buys each job once;
// nothing was armed or written for them meanwhile.
func TestHeldDeliveriesOutliveTheirWorker(t *testing.T) {
	t.Parallel()
	l, _ := setupLimited(t, sandbox.Config{})
	ctx := context.Background()
	pauser := l.pauser(t)
	a := l.limitedEngine("a", time.Minute)
	var jobs []string
	for i := 0; i < 5; i++ {
		out, err := a.Schedule(ctx, []byte(cmdFor(i)), "test")
		require.NoError(t, err)
		jobs = append(jobs, out.JobID)
	}
	// Paused once the wake-ups are written: the pause need only outlast
	// the engine's start and its end.
	pauser.Pause(ctx, "", time.Now().Add(4*time.Second), "test")
	waitPaused(t, l)
	written := l.timersWritten(t)
	cons, err := l.srv.JS.Consumer(ctx, snats.WorkStream, snats.WorkConsumer)
	require.NoError(t, err)

	stopA := l.start(a, 8)
	natstest.WaitFor(t, 10*time.Second, func() error {
		if n := a.Held(); n < len(jobs) {
			return fmt.Errorf("a holds %d of %d wake-ups", n, len(jobs))
		}
		return nil
	})
	stopA() // a dies with every wake-up handed back to the server
	ci, err := cons.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, ci.AckFloor.Consumer, "a acknowledged none of them")
	require.Equal(t, len(jobs), ci.NumAckPending, "they wait unacknowledged")

	l.start(l.limitedEngine("b", time.Minute), 8)
	states := l.waitTerminal(jobs, time.Minute)
	l.requireBoughtOnce(t, states)
	require.Equal(t, written, l.timersWritten(t), "no timer written for the held wake-ups")
}

// TestInFlightCapHoldsThroughTimeouts: an account allows one search at a
// time, and every search runs longer than the client waits. The first
// job's request times out while its search goes on at the API; the second
// job must not start its search until the first's is over (its resends of
// the key take the slot over), so the API never runs two at once.
func TestInFlightCapHoldsThroughTimeouts(t *testing.T) {
	t.Parallel()
	l, _ := setupLimited(t, sandbox.Config{SlowSearchTime: 1500 * time.Millisecond, Faults: sandbox.Faults{SlowSearch: 1}})
	cfg := l.client.Config()
	cfg.Timeout = 300 * time.Millisecond // shorter than every search
	client, err := serper.New(cfg)
	require.NoError(t, err)
	t.Cleanup(client.CloseIdleConnections)
	l.client = client
	l.setLimits(accounts.Limits{MaxInFlight: 1})

	most := 0
	stop := make(chan struct{})
	sampled := make(chan int)
	go func() {
		for {
			select {
			case <-stop:
				sampled <- most
				return
			case <-time.After(5 * time.Millisecond):
				most = max(most, l.sb.Stats().Running)
			}
		}
	}()
	l.start(l.limitedEngine("a", time.Minute), 4)
	jobs := []string{jobFor(t, cmdFor(0)), jobFor(t, cmdFor(1))}
	l.publish(cmdFor(0))
	l.publish(cmdFor(1))
	states := l.waitTerminal(jobs, time.Minute)
	close(stop)
	require.Equal(t, 1, <-sampled, "searches running at the API at once")
	l.requireBoughtOnce(t, states)
}
