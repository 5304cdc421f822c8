package serper_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// espresso is the contract's example body.
var espresso = []byte(`{"query":"espresso scale","country":"US","language":"en","device":"mobile","limit":10}`)

// body returns a distinct search body per n: one job, one body.
func body(n int) []byte {
	return []byte(`{"query":"espresso scale ` + string(rune('a'+n%26)) + string(rune('a'+n/26%26)) + `","country":"US","language":"en","device":"mobile","limit":10}`)
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

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

// harness is a sandbox on a fake clock and a client for it.
type harness struct {
	t      *testing.T
	sb     *sandbox.Server
	url    string
	clock  *fakeClock
	client *serper.Client
	// lastRequestID is the request id a prepare step got.
	lastRequestID string
}

// setup starts a sandbox for cfg and a client whose timeout is timeout
// (0: the production default of 100 s).
func setup(t *testing.T, cfg sandbox.Config, timeout time.Duration) *harness {
	t.Helper()
	clock := &fakeClock{t: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	cfg.Now = clock.Now
	sb := sandbox.New(cfg)
	url, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	// No keep-alives: Go's transport silently resends a request whose reused
	// connection died (safe, same key), which would hide the fault a test
	// wants to see.
	transport := &http.Transport{DisableKeepAlives: true}
	client, err := serper.New(serper.Config{BaseURL: url, Token: sandbox.DefaultToken, Timeout: timeout,
		AllowShortTimeout: timeout != 0, Transport: transport})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, sb.Close())
		transport.CloseIdleConnections()
	})
	return &harness{t: t, sb: sb, url: url, clock: clock, client: client}
}

func (h *harness) search(key string, body []byte) serper.Result {
	return h.client.Search(context.Background(), key, body)
}

// ledger returns the charges of keys.
func (h *harness) ledger(keys ...string) []serper.LedgerEntry {
	h.t.Helper()
	entries, err := h.client.Ledger(context.Background(), serper.LedgerQuery{Keys: keys})
	require.NoError(h.t, err)
	return entries
}

func (h *harness) waitIdle() {
	h.t.Helper()
	require.Eventually(h.t, func() bool { return h.sb.Stats().Running == 0 }, 10*time.Second, time.Millisecond)
}

func newKey() string { return uuid.NewString() }

// The engine's default next actions (the README's retry contract). The aggregate
// owns the real table; this copy shows that a Result carries all it needs.
const (
	sameKey   = "resend same key"
	newKeyAct = "new key"
	waitNew   = "wait Retry-After, new key"
	reconcile = "reconcile"
	store     = "store"
	fail      = "fail"
)

func nextAction(r serper.Result) string {
	switch {
	case !r.Confirmed:
		return sameKey
	case r.Status == 200:
		return store
	case r.Code == serper.CodeIdempotencyInProgress, r.Code == serper.CodeBillingUnavailable:
		return sameKey
	case r.Code == serper.CodeIdempotencyReplayUnavailable:
		return reconcile
	case r.Status == 429:
		return waitNew
	case r.Status == 408, r.Status == 424, r.Status == 503:
		return newKeyAct
	}
	return fail
}
