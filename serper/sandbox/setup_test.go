package sandbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// espresso is the contract's example body.
const espresso = `{"query":"espresso scale","country":"US","language":"en","device":"mobile","limit":10}`

// fakeClock is the sandbox's clock in tests: it moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *fakeClock { return &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is one started sandbox with a fake clock and a plain HTTP client.
type env struct {
	t     *testing.T
	srv   *sandbox.Server
	url   string
	token string
	clock *fakeClock
	http  *http.Client
}

func setup(t *testing.T, cfg sandbox.Config) *env {
	t.Helper()
	clock := newClock()
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	srv := sandbox.New(cfg)
	url, err := srv.Start("127.0.0.1:0")
	require.NoError(t, err)
	e := &env{t: t, srv: srv, url: url, token: sandbox.DefaultToken, clock: clock,
		http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	if cfg.Token != "" {
		e.token = cfg.Token
	}
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		e.http.CloseIdleConnections()
	})
	return e
}

// reply is a raw HTTP exchange's outcome.
type reply struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

// errorField returns a field of the error envelope.
func (r reply) errorField(t *testing.T, name string) any {
	t.Helper()
	e, ok := r.json(t)["error"].(map[string]any)
	require.True(t, ok, "not an error envelope: %s", r.body)
	return e[name]
}

func (e *env) do(ctx context.Context, req *http.Request) reply {
	resp, err := e.http.Do(req.WithContext(ctx))
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: body, err: err}
}

// search posts body under key with the sandbox's token; mods adjust the request.
func (e *env) search(key, body string, mods ...func(*http.Request)) reply {
	return e.searchCtx(context.Background(), key, body, mods...)
}

func (e *env) searchCtx(ctx context.Context, key, body string, mods ...func(*http.Request)) reply {
	req, err := http.NewRequest(http.MethodPost, e.url+"/v1/search", bytes.NewReader([]byte(body)))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	for _, m := range mods {
		m(req)
	}
	return e.do(ctx, req)
}

func (e *env) get(path string) reply {
	req, err := http.NewRequest(http.MethodGet, e.url+path, nil)
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+e.token)
	return e.do(context.Background(), req)
}

// ledger returns the entries of a raw ledger query such as "idempotencyKey=K".
func (e *env) ledger(query string) []sandbox.LedgerEntry {
	e.t.Helper()
	r := e.get("/v1/billing/ledger?" + query)
	require.NoError(e.t, r.err)
	require.Equal(e.t, http.StatusOK, r.status, "%s", r.body)
	var out struct{ Entries []sandbox.LedgerEntry }
	require.NoError(e.t, json.Unmarshal(r.body, &out))
	return out.Entries
}

// waitFor polls cond (bounded) until it holds: the sandbox's executions run
// on their own goroutines, and tests wait on their visible effects.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, "waiting for %s", what)
}

func header(name, value string) func(*http.Request) {
	return func(r *http.Request) {
		if value == "" {
			r.Header.Del(name)
			return
		}
		r.Header.Set(name, value)
	}
}
