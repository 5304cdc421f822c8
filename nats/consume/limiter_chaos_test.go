package consume_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
	"github.com/stretchr/testify/require"
)

// TestLimitsChangedAndBrokenUnderLoad: engines work through many jobs of
// one account while its cap is lowered, broken, raised, broken again and
// lowered; an engine starts while the stored value is broken. From the
// sandbox's own view (searches running when one starts) no search starts
// beyond the cap that applied when its permit was given (when its slot was
// written), the new engine buys nothing until the value is mended, and
// every job is bought once.
func TestLimitsChangedAndBrokenUnderLoad(t *testing.T) {
	t.Parallel()
	// Deliveries that wait for a slot in the process are not delivered
	// again meanwhile, as with the engine's default --ack-wait.
	l := setupLiveAckWait(t, sandbox.Faults{}, 30*time.Second)
	sb := sandbox.New(sandbox.Config{Seed: 1, SearchTime: 40 * time.Millisecond, SlowSearchTime: 400 * time.Millisecond,
		Faults: sandbox.Faults{SlowSearch: 0.2}}) // some searches outlast a change by far
	t.Cleanup(func() { _ = sb.Close() })
	l.sb = sb
	g := &gauge{}
	ctx := context.Background()
	kv, err := l.srv.JS.KeyValue(ctx, snats.AccountsBucket)
	require.NoError(t, err)
	slots := watchSlots(t, kv)
	// caps are the caps set, by the revision of serp_accounts they were
	// written at.
	var caps []capAt
	setCap := func(n int) {
		rev, err := kv.Put(ctx, "limits.default", []byte(fmt.Sprintf(`{"max_in_flight":%d}`, n)))
		require.NoError(t, err)
		caps = append(caps, capAt{rev: rev, cap: n})
	}
	put := func(value string) {
		_, err := kv.PutString(ctx, "limits.default", value)
		require.NoError(t, err)
	}

	var lims []*engine.Limiter
	engine := func(name string) {
		lim, err := engine.NewLimiter(ctx, l.accounts(), name, l.policy.Lease.D(), nil, nil)
		require.NoError(t, err)
		t.Cleanup(lim.Close)
		lims = append(lims, lim)
		front := httptest.NewServer(g.front(name, sb))
		t.Cleanup(front.Close)
		client, err := serper.New(serper.Config{BaseURL: front.URL, Token: sandbox.DefaultToken, Timeout: 5 * time.Second, AllowShortTimeout: true})
		require.NoError(t, err)
		t.Cleanup(client.CloseIdleConnections)
		eng, err := engine.New(engine.Config{Name: name, Store: l.store, API: client, Timers: snats.NewTimers(l.srv.JS, nil),
			Policy: l.policy, Limiter: lim, StarveAfter: time.Minute, ReconcileRetry: 100 * time.Millisecond})
		require.NoError(t, err)
		l.start(eng, 6)
	}
	applied := func(n int) {
		natstest.WaitFor(t, 10*time.Second, func() error {
			for _, lim := range lims {
				if got := lim.Limits("").MaxInFlight; got != n || len(lim.Refusals()) != 0 {
					return fmt.Errorf("a limiter applies a cap of %d", got)
				}
			}
			return nil
		})
	}
	refused := func() {
		natstest.WaitFor(t, 10*time.Second, func() error {
			for _, lim := range lims {
				if len(lim.Refusals()) == 0 {
					return errors.New("a limiter has not refused the value yet")
				}
			}
			return nil
		})
	}

	setCap(4)
	engine("a")
	engine("b")
	applied(4)
	var jobs []string
	for i := range 80 {
		l.publish(cmdFor(i))
		jobs = append(jobs, jobFor(t, cmdFor(i)))
	}
	g.waitStarts(t, 8)
	setCap(2)
	applied(2)
	g.waitStarts(t, 8)
	put(`{"max_in_flight":-1}`) // the engines keep the cap of two
	refused()
	engine("c") // has no cap to keep: holds new purchases
	require.True(t, lims[2].Refusals()[0].Held)
	g.waitStarts(t, 8)
	mended := time.Now()
	setCap(3)
	applied(3)
	g.waitStarts(t, 8)
	put(`null`) // every engine keeps the cap of three, c included
	refused()
	g.waitStarts(t, 8)
	setCap(1)
	applied(1)

	states := l.waitTerminal(jobs, 2*time.Minute)
	byKey := map[string]string{}
	for j, c := range l.chargesPerJob(states) {
		require.Equal(t, aggregate.StatusSucceeded, states[j].Status)
		require.Equal(t, 1, c, "job %s bought once", j)
		for _, a := range states[j].Attempts {
			byKey[a.Key] = j
		}
	}
	starts := g.all()
	natstest.WaitFor(t, 10*time.Second, func() error {
		for _, s := range starts {
			if slots.last(byKey[s.key]) == 0 {
				return fmt.Errorf("job %s started a search without a slot (or its slot is not seen yet)", byKey[s.key])
			}
		}
		return nil
	})
	underLast := 0
	for _, s := range starts {
		job := byKey[s.key]
		rev := slots.last(job)
		allowed := 0
		for _, c := range caps {
			if c.rev < rev {
				allowed = c.cap
			}
		}
		require.LessOrEqual(t, s.running, allowed, "job %s started a search with %d running, itself included", job, s.running)
		if rev > caps[len(caps)-1].rev {
			underLast++
		}
		if s.front == "c" {
			require.False(t, s.at.Before(mended), "the engine that started on a refused value bought before it was mended")
		}
	}
	require.Positive(t, underLast, "searches started under the last cap")
}

// capAt is a cap written at a revision of serp_accounts.
type capAt struct {
	rev uint64
	cap int
}

// slotRevs records the revision at which each job last took a slot from
// none or from another job: the slot its search was let start with (the
// job's later writes to its slot, taking it over from another delivery or
// giving it back, are the same search's).
type slotRevs struct {
	mu   sync.Mutex
	revs map[string]uint64 // job -> the revision of its last slot created
}

func (s *slotRevs) last(job string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revs[job]
}

// watchSlots records the slots created in kv until the test ends.
func watchSlots(t *testing.T, kv jetstream.KeyValue) *slotRevs {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := kv.WatchFiltered(ctx, []string{"slot.default.*"}, jetstream.UpdatesOnly())
	require.NoError(t, err)
	s := &slotRevs{revs: map[string]uint64{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		holder := map[string]string{} // slot key -> the job whose value is there
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			var v struct {
				Job string `json:"job"`
			}
			if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &v) != nil {
				delete(holder, e.Key())
				continue
			}
			if holder[e.Key()] != v.Job {
				s.mu.Lock()
				s.revs[v.Job] = max(s.revs[v.Job], e.Revision())
				s.mu.Unlock()
			}
			holder[e.Key()] = v.Job
		}
	}()
	t.Cleanup(func() { cancel(); _ = w.Stop(); <-done })
	return s
}

// gauge counts the searches running at the sandbox behind every front,
// and records each start.
type gauge struct {
	mu      sync.Mutex
	running int
	starts  []gaugeStart
}

type gaugeStart struct {
	at      time.Time
	running int // itself included
	front   string
	key     string
}

// front is a handler for the sandbox that counts the searches of name,
// each from its request until its answer starts: the client can see the
// answer, and the engine free its slot, only once the search is counted out.
func (g *gauge) front(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/search" {
			h.ServeHTTP(w, r)
			return
		}
		g.mu.Lock()
		g.running++
		g.starts = append(g.starts, gaugeStart{at: time.Now(), running: g.running, front: name, key: r.Header.Get("Idempotency-Key")})
		g.mu.Unlock()
		end := sync.OnceFunc(func() {
			g.mu.Lock()
			g.running--
			g.mu.Unlock()
		})
		defer end()
		h.ServeHTTP(&answerStart{ResponseWriter: w, start: end}, r)
	})
}

// answerStart calls start when the answer starts.
type answerStart struct {
	http.ResponseWriter
	start func()
}

func (a *answerStart) WriteHeader(code int) { a.start(); a.ResponseWriter.WriteHeader(code) }

func (a *answerStart) Write(b []byte) (int, error) { a.start(); return a.ResponseWriter.Write(b) }

func (g *gauge) all() []gaugeStart {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gaugeStart(nil), g.starts...)
}

// waitStarts waits until n more searches have started.
func (g *gauge) waitStarts(t *testing.T, n int) {
	t.Helper()
	want := len(g.all()) + n
	natstest.WaitFor(t, 30*time.Second, func() error {
		if got := len(g.all()); got < want {
			return fmt.Errorf("%d searches started, waiting for %d", got, want)
		}
		return nil
	})
}
