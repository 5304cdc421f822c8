package chaos_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/chaos"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/consume"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// TestEnginesSurviveLeaderLoss runs two engines on a 3-node JetStream cluster
// (every stream R3, fsync on every write) under the sandbox's fault mix,
// and shuts down the SERP_EVENTS stream leader mid-run, then the SERP_WORK
// leader: every job finishes, every event whose append was acknowledged
// is in the log, and no job is charged twice.
func TestEnginesSurviveLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := natstest.RunCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := snats.EnsureEventStream(ctx, js, snats.EventStreamOptions{Replicas: 3})
	require.NoError(t, err)
	require.NoError(t, snats.EnsureEngineStreams(ctx, js, snats.StreamOptions{Replicas: 3}, 2*time.Second))
	sb := sandbox.New(sandbox.Config{Seed: 3, SearchTime: 5 * time.Millisecond, SlowSearchTime: time.Second,
		Faults: chaos.DefaultFaults()})
	url, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })

	acked := &ackLog{ids: map[string][]string{}}
	for i := range 2 {
		_, ejs := c.Connect(t)
		startEngine(t, ejs, acked, url, fmt.Sprintf("e%d", i+1))
	}
	// The slots run over the next 20 s, so jobs wait on their timers
	// (in SERP_WORK) and run all through the leader changes.
	const n = 200
	start := time.Now().Add(2 * time.Second)
	var jobs, payloads []string
	for i := range n {
		slot := start.Add(time.Duration(i) * 100 * time.Millisecond).UTC().Format(time.RFC3339Nano)
		payload := fmt.Sprintf(`{"slot":%q,"query":"cluster %d","country":"US","language":"en","device":"mobile"}`, slot, i)
		jobs, payloads = append(jobs, chaos.JobOf([]byte(payload))), append(payloads, payload)
	}
	for _, payload := range payloads {
		natstest.WaitFor(t, time.Minute, func() error {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := js.Publish(pctx, snats.ScheduleSubject, []byte(payload))
			return err
		})
	}
	st, err := snats.NewEventStore(ctx, js, snats.EventStoreOptions{})
	require.NoError(t, err)
	done := map[string]aggregate.State{}
	finished := func(share int) func() error {
		return func() error {
			for _, j := range jobs {
				if _, ok := done[j]; ok {
					continue
				}
				lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				evs, _, err := st.Load(lctx, j)
				cancel()
				if err != nil {
					return err
				}
				if s := aggregate.Fold(evs); s.Finished() {
					done[j] = s
				}
			}
			if len(done)*100 < share*n {
				return fmt.Errorf("%d of %d jobs finished", len(done), n)
			}
			return nil
		}
	}

	natstest.WaitFor(t, 2*time.Minute, finished(20))
	old := c.StreamLeader(t, js, snats.EventStream, "")
	t.Logf("%d jobs finished; shutting down the %s leader %s", len(done), snats.EventStream, old.Name)
	c.Shutdown(old)
	natstest.WaitFor(t, 2*time.Minute, finished(50))
	c.Restart(t, old)
	c.WaitReady(t)
	work := c.StreamLeader(t, js, snats.WorkStream, "")
	t.Logf("%d jobs finished; %s is back; shutting down the %s leader %s", len(done), old.Name, snats.WorkStream, work.Name)
	c.Shutdown(work)
	natstest.WaitFor(t, 2*time.Minute, finished(75))
	c.Restart(t, work)
	c.WaitReady(t)
	natstest.WaitFor(t, 3*time.Minute, finished(100))
	c.WaitStreamCurrent(t, js, snats.EventStream)

	perKey := sb.Stats().ChargesPerKey
	for _, j := range jobs {
		evs, _, err := st.Load(ctx, j)
		require.NoError(t, err)
		require.Empty(t, aggregate.Verify(evs), "job %s", j)
		books := chaos.BooksOf(aggregate.Fold(evs), perKey)
		require.LessOrEqual(t, books.Keys, 1, "job %s: %d of its keys were charged", j, books.Keys)
		require.Equal(t, books.Doubled, aggregate.PurchasesOf(evs).Doubled, "job %s: every double charge of the API found live", j)
		have := map[string]bool{}
		for _, e := range evs {
			have[e.ID] = true
		}
		for _, id := range acked.of(j) {
			require.True(t, have[id], "job %s: event %s was acknowledged but is not in the log", j, id)
		}
	}
	require.Zero(t, sb.Stats().BodyViolations)
	t.Logf("%d jobs, %d acknowledged appends, sandbox faults %v", n, acked.count(), sb.Stats().Faults)
}

// startEngine runs an engine (intake and workers) on js until the test
// ends; acked, if not nil, learns every acknowledged append.
func startEngine(t *testing.T, js jetstream.JetStream, acked *ackLog, sandboxURL, name string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := snats.NewEventStore(ctx, js, snats.EventStoreOptions{})
	require.NoError(t, err)
	client, err := serper.New(serper.Config{BaseURL: sandboxURL, Token: sandbox.DefaultToken, Timeout: 2 * time.Second, AllowShortTimeout: true})
	require.NoError(t, err)
	p := aggregate.DefaultPolicy()
	p.BaseDelay, p.MaxDelay, p.MinDelay = events.Duration(20*time.Millisecond), events.Duration(300*time.Millisecond), events.Duration(10*time.Millisecond)
	p.Lease = events.Duration(3 * time.Second)
	eng, err := engine.New(engine.Config{Name: name, Store: &recordingStore{Store: st, acked: acked}, API: client,
		Timers: snats.NewTimers(js, nil), Policy: p, ReconcileRetry: 200 * time.Millisecond, RetryDelay: 100 * time.Millisecond})
	require.NoError(t, err)
	intake, err := snats.Consumer(ctx, js, snats.CommandStream, snats.IntakeConsumer)
	require.NoError(t, err)
	work, err := snats.Consumer(ctx, js, snats.WorkStream, snats.WorkConsumer)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = consume.Intake(ctx, eng, consume.NewRejections(js), intake, consume.Options{Concurrency: 16})
	}()
	go func() {
		defer wg.Done()
		_ = consume.Work(ctx, eng, work, consume.Options{Concurrency: 16, Grace: 5 * time.Second})
	}()
	t.Cleanup(func() { cancel(); wg.Wait(); client.CloseIdleConnections() })
}

// recordingStore remembers every event whose append the store
// acknowledged.
type recordingStore struct {
	engine.Store
	acked *ackLog
}

func (r *recordingStore) Append(ctx context.Context, jobID string, expected uint64, evs ...events.Event) (uint64, error) {
	v, err := r.Store.Append(ctx, jobID, expected, evs...)
	if err == nil && r.acked != nil {
		for _, e := range evs {
			r.acked.add(jobID, e.ID)
		}
	}
	return v, err
}

type ackLog struct {
	mu  sync.Mutex
	ids map[string][]string
}

func (a *ackLog) add(job, id string) { a.mu.Lock(); a.ids[job] = append(a.ids[job], id); a.mu.Unlock() }
func (a *ackLog) of(job string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.ids[job]...)
}
func (a *ackLog) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, ids := range a.ids {
		n += len(ids)
	}
	return n
}
