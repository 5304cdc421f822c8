package engine_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/serper"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

// clock is a fake clock tests move by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
}
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// timers records the wake-up time of every job.
type timers struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (t *timers) Arm(_ context.Context, jobID string, at time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.at == nil {
		t.at = map[string]time.Time{}
	}
	t.at[jobID] = at
	return nil
}

func (t *timers) get(jobID string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.at[jobID]
	return at, ok
}

// api is a scripted provider: reply decides each send's result, and it
// keeps a ledger of charges by key.
type api struct {
	mu      sync.Mutex
	reply   func(key string, n int) serper.Result
	sends   map[string]int
	bodies  map[string]string
	ledger  []serper.LedgerEntry
	ledgerE error
	lookups int
}

func newAPI(reply func(key string, n int) serper.Result) *api {
	return &api{reply: reply, sends: map[string]int{}, bodies: map[string]string{}}
}

func (a *api) Search(_ context.Context, key string, body []byte) serper.Result {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sends[key]++
	if b, ok := a.bodies[key]; ok && b != string(body) {
		panic("body changed under key " + key)
	}
	a.bodies[key] = string(body)
	return a.reply(key, a.sends[key])
}

func (a *api) Ledger(_ context.Context, q serper.LedgerQuery) ([]serper.LedgerEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lookups++
	if a.ledgerE != nil {
		return nil, a.ledgerE
	}
	var out []serper.LedgerEntry
	for _, e := range a.ledger {
		for _, k := range q.Keys {
			if e.IdempotencyKey == k {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func (a *api) charge(key, reqID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ledger = append(a.ledger, serper.LedgerEntry{RequestID: reqID, IdempotencyKey: key, Pages: 1, BilledPages: 1, AmountMicros: 1000})
}

func (a *api) sendCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.sends {
		n += c
	}
	return n
}

func success(reqID string, replayed bool) serper.Result {
	return serper.Result{Confirmed: true, Status: 200, RequestID: reqID, Replayed: replayed, Pages: 1,
		Search: json.RawMessage(`{"requestId":"` + reqID + `","organic":[]}`)}
}

func confirmed(status int, code, reqID string) serper.Result {
	return serper.Result{Confirmed: true, Status: status, Code: code, RequestID: reqID}
}

func unknown(why string) serper.Result { return serper.Result{Unknown: why} }

// env is one engine over a fresh in-memory store, with a fake clock.
type env struct {
	t      *testing.T
	store  *memstore.Store
	clock  *clock
	timers *timers
	api    *api
}

func setup(t *testing.T, reply func(key string, n int) serper.Result) *env {
	t.Helper()
	return &env{t: t, store: memstore.New(memstore.Options{}), clock: &clock{now: t0}, timers: &timers{}, api: newAPI(reply)}
}

func (e *env) engine(name string, hooks engine.Hooks) *engine.Engine {
	e.t.Helper()
	eng, err := engine.New(engine.Config{Name: name, Store: e.store, API: e.api, Timers: e.timers,
		Now: e.clock.Now, Hooks: hooks, ReconcileRetry: time.Minute})
	require.NoError(e.t, err)
	return eng
}

var command = []byte(`{"slot":"2026-12-02T14:00:00Z","query":"espresso scale","country":"US","language":"en","device":"mobile","limit":10}`)

func (e *env) schedule(eng *engine.Engine) string {
	e.t.Helper()
	out, err := eng.Schedule(context.Background(), command, "test")
	require.NoError(e.t, err)
	return out.JobID
}

// runToEnd steps a job, moving the fake clock to each wake-up, until it is
// done; it fails the test if that takes too many steps.
func (e *env) runToEnd(eng *engine.Engine, jobID string) aggregate.State {
	e.t.Helper()
	for i := 0; i < 200; i++ {
		next, err := eng.Step(context.Background(), jobID, nil)
		require.NoError(e.t, err)
		if next.Step == aggregate.StepDone {
			return e.state(jobID)
		}
		e.clock.Set(next.At)
	}
	e.t.Fatalf("job %s did not finish", jobID)
	return aggregate.State{}
}

func (e *env) state(jobID string) aggregate.State {
	evs, _, err := e.store.Load(context.Background(), jobID)
	require.NoError(e.t, err)
	return aggregate.Fold(evs)
}

func (e *env) log(jobID string) []events.Event {
	evs, _, err := e.store.Load(context.Background(), jobID)
	require.NoError(e.t, err)
	return evs
}

func typesOf(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type()
	}
	return out
}
