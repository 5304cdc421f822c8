package sandbox_test

import (
	"context"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

var update = flag.Bool("update", false, "rewrite the API fixtures in testdata/api from the sandbox")

// fixtures is where the captured replies live; the client's decoder tests
// and its fuzz corpus read them.
const fixtures = "../../testdata/api"

// TestGoldenReplies captures one reply of every kind from a seeded sandbox
// on a fake clock, so the fixtures are exactly what the sandbox sends. Run
// with -update after changing a reply on purpose.
func TestGoldenReplies(t *testing.T) {
	e := setup(t, sandbox.Config{Seed: 1, SlowSearchTime: 3600e9})
	capture := func(name string, r reply, status int) {
		t.Helper()
		require.NoError(t, r.err)
		require.Equal(t, status, r.status, "%s: %s", name, r.body)
		path := filepath.Join(fixtures, name)
		if *update {
			require.NoError(t, os.WriteFile(path, r.body, 0o644))
			return
		}
		want, err := os.ReadFile(path)
		require.NoError(t, err, "run go test ./serper/sandbox -run TestGoldenReplies -update")
		require.Equal(t, string(want), string(r.body), name)
	}
	key := func(n byte) string {
		return "00000000-0000-4000-8000-0000000000" + string([]byte{'0' + n/10, '0' + n%10})
	}

	capture("200_success.json", e.search(key(1), espresso), http.StatusOK)
	capture("200_zero_results.json", e.search(key(2), `{"query":"zero-results: espresso scale"}`), http.StatusOK)
	capture("ledger_entries.json", e.get("/v1/billing/ledger?idempotencyKey="+key(1)+","+key(2)), http.StatusOK)
	capture("401_unauthorized.json", e.search(key(3), espresso, header("Authorization", "Bearer wrong-token")), http.StatusUnauthorized)
	capture("422_invalid_request.json", e.search(key(3), `{"query":"","country":"USA","limit":0,"page":2}`), http.StatusUnprocessableEntity)

	for i, c := range []struct {
		name   string
		faults sandbox.Faults
		status int
	}{
		{"408_search_timeout.json", sandbox.Faults{Timeout408: 1}, http.StatusRequestTimeout},
		{"424_upstream_failed.json", sandbox.Faults{Failed424: 1}, http.StatusFailedDependency},
		{"503_service_unavailable.json", sandbox.Faults{Unavailable503: 1}, http.StatusServiceUnavailable},
		{"503_billing_unavailable.json", sandbox.Faults{BillingUnavailable503: 1}, http.StatusServiceUnavailable},
		{"429_rate_limited.json", sandbox.Faults{RateLimited429: 1}, http.StatusTooManyRequests},
		{"502_gateway.html", sandbox.Faults{GatewayPage502: 1}, http.StatusBadGateway},
		{"504_gateway.html", sandbox.Faults{GatewayPage504: 1}, http.StatusGatewayTimeout},
	} {
		e.srv.SetFaults(c.faults)
		capture(c.name, e.search(key(byte(10+i)), espresso), c.status)
	}

	e.srv.SetFaults(sandbox.Faults{EarlyExpiry: 1})
	require.Equal(t, http.StatusOK, e.search(key(20), espresso).status)
	e.srv.SetFaults(sandbox.Faults{})
	capture("409_idempotency_replay_unavailable.json", e.search(key(20), espresso), http.StatusConflict)

	// In progress: a slow search holds the key while a resend arrives.
	e.srv.SetFaults(sandbox.Faults{SlowSearch: 1})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan reply, 1)
	go func() { first <- e.searchCtx(ctx, key(21), espresso) }()
	waitFor(t, "the slow search to start", func() bool { return e.srv.Stats().Running == 1 })
	e.srv.SetFaults(sandbox.Faults{})
	capture("409_idempotency_in_progress.json", e.search(key(21), espresso), http.StatusConflict)
	cancel()
	require.Error(t, (<-first).err)
}
