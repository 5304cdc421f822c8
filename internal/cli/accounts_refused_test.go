package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// refusedBucket is a server with the engine's buckets whose limits of
// team-b are a value the engines refuse.
func refusedBucket(t *testing.T, value string) *natstest.Server {
	t.Helper()
	ctx := context.Background()
	srv := natstest.RunServer(t)
	require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{}, time.Second))
	kv, err := srv.JS.KeyValue(ctx, snats.AccountsBucket)
	require.NoError(t, err)
	_, err = kv.PutString(ctx, "limits.team-b", value)
	require.NoError(t, err)
	return srv
}

// TestAccountsSetOverARefusedValue: "serpent accounts" shows a stored
// value the engines refuse as refused, not as limits that apply; "set"
// overwrites it with the limits given, warning and naming the key and the
// bucket, and refuses to when no limit is given.
func TestAccountsSetOverARefusedValue(t *testing.T) {
	for _, value := range []string{`{not json`, `null`, `{"max_inflight":1}`, `{"max_in_flight":-3,"rate_per_sec":-1}`} {
		t.Run(value, func(t *testing.T) {
			srv := refusedBucket(t, value)
			out, err := cli(t, srv.URL, "accounts")
			require.NoError(t, err)
			require.Contains(t, out, "REFUSED")
			require.Contains(t, out, value+" (limits: ")
			require.NotContains(t, out, "of -3", "a refused cap is not shown as applied")
			require.NotContains(t, out, "-1/s")

			_, err = cli(t, srv.URL, "accounts", "set", "team-b")
			require.ErrorIs(t, err, errUsage)
			require.ErrorContains(t, err, "key limits.team-b of bucket serp_accounts")

			var stdout, stderr bytes.Buffer
			env := map[string]string{"NATS_URL": srv.URL}
			err = Run(context.Background(), []string{"accounts", "set", "team-b", "--max-in-flight", "2"},
				func(k string) string { return env[k] }, &stdout, &stderr)
			require.NoError(t, err)
			require.Contains(t, stderr.String(), "warning: key limits.team-b of bucket serp_accounts holds limits the engines refuse")
			stored, err := engine.ReadLimits(context.Background(), accountsKV(t, srv.JS), "team-b")
			require.NoError(t, err)
			require.NoError(t, stored.Refused)
			require.Equal(t, accounts.Limits{MaxInFlight: 2}, stored.Limits, "the limits given alone")
			require.Contains(t, stdout.String(), "0 of 2")
		})
	}
}

// TestFileLimitsMendARefusedValue: an engine whose --accounts file has
// limits for an account whose stored value is refused stores the file's
// limits, with a warning naming the account, the key and the bucket,
// rather than stopping on a bare decoder error.
func TestFileLimitsMendARefusedValue(t *testing.T) {
	ctx := context.Background()
	srv := refusedBucket(t, `{not json`)
	file := filepath.Join(t.TempDir(), "accounts.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"name":"team-b","limits":{"max_in_flight":2}}]`), 0o600))
	var logged bytes.Buffer
	f := &engineFlags{accountsFile: file, name: "w"}
	f.policy.Lease = events.Duration(2 * time.Minute)
	var cleanup []func()
	_, _, err := f.startAccounts(ctx, func(string) string { return "" }, srv.JS, nil, nil,
		slog.New(slog.NewJSONHandler(&logged, nil)), func(string, ...any) {}, &cleanup)
	require.NoError(t, err)
	for _, c := range cleanup {
		c()
	}
	stored, err := engine.ReadLimits(ctx, accountsKV(t, srv.JS), "team-b")
	require.NoError(t, err)
	require.Equal(t, accounts.Limits{MaxInFlight: 2}, stored.Limits)
	var warned bool
	for _, line := range strings.Split(strings.TrimSpace(logged.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if rec["level"] == "WARN" && rec["account"] == "team-b" && rec["key"] == "limits.team-b" && rec["bucket"] == "serp_accounts" {
			warned = true
		}
	}
	require.True(t, warned, "log: %s", logged.String())
}

// TestAccountsFileLimitsAreStrict: the --accounts file's limits are read
// by the engines' own decoder: what the bucket would refuse, the file does.
func TestAccountsFileLimitsAreStrict(t *testing.T) {
	for value, want := range map[string]string{
		`{"max_inflight":1}`:   `unknown field "max_inflight"`,
		`null`:                 "null",
		`{"max_in_flight":-1}`: "cannot be negative",
		`{"burst":150000}`:     "burst is at most",
	} {
		file := filepath.Join(t.TempDir(), "accounts.json")
		require.NoError(t, os.WriteFile(file, []byte(`[{"name":"team-b","limits":`+value+`}]`), 0o600))
		_, err := readAccounts(file)
		require.ErrorIs(t, err, errUsage, value)
		require.ErrorContains(t, err, `account "team-b"`, value)
		require.ErrorContains(t, err, want, value)
	}
}

// TestRefusedLimitsShowUp: an engine started while team-b's stored limits
// are refused holds its new purchases, and says so: /readyz fails naming
// the account, the key and why; the metric to alert on is 1; the status
// page shows the refused value. Mended and broken again, the engine keeps
// the mended limits: readiness warns and does not fail.
func TestRefusedLimitsShowUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := refusedBucket(t, `{"max_inflight":1}`)
	engineStreams(t, srv)
	lim, err := engine.NewLimiter(ctx, accountsKV(t, srv.JS), "w", time.Minute, nil, nil)
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	mx, tally := newEngineMetrics(srv.JS, "w", time.Now, nil)
	ops := &opsServer{nc: srv.Conn, js: srv.JS, metrics: mx, tally: tally, limiter: lim}

	lines, ready := ops.readiness(ctx)
	require.False(t, ready)
	require.Contains(t, strings.Join(lines, "\n"),
		`FAIL account team-b limits: key limits.team-b of bucket serp_accounts is refused (limits: unknown field "max_inflight"`)
	rec := httptest.NewRecorder()
	ops.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, 1.0, metricValue(rec.Body.String(), `serpent_account_limits_refused{account="team-b"}`))
	natstest.WaitFor(t, 10*time.Second, func() error {
		rec := httptest.NewRecorder()
		ops.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if page := rec.Body.String(); !strings.Contains(page, `data-refused="team-b"`) || !strings.Contains(page, "1 engine holds new purchases") {
			return errors.New("the page does not show the engine holding team-b's purchases yet")
		}
		return nil
	})

	require.NoError(t, engine.SetLimits(ctx, accountsKV(t, srv.JS), "team-b", accounts.Limits{MaxInFlight: 1}))
	natstest.WaitFor(t, 10*time.Second, func() error {
		if _, ready := ops.readiness(ctx); !ready {
			return errors.New("not ready once mended")
		}
		return nil
	})
	kv, err := srv.JS.KeyValue(ctx, snats.AccountsBucket)
	require.NoError(t, err)
	_, err = kv.PutString(ctx, "limits.team-b", `null`)
	require.NoError(t, err)
	natstest.WaitFor(t, 10*time.Second, func() error {
		lines, ready := ops.readiness(ctx)
		if !ready || !strings.Contains(strings.Join(lines, "\n"), "warn account team-b limits: key limits.team-b of bucket serp_accounts is refused") {
			return fmt.Errorf("ready %v: %v", ready, lines)
		}
		return nil
	})
	// The cap the engine kept, as it reports it.
	natstest.WaitFor(t, 10*time.Second, func() error {
		rec := httptest.NewRecorder()
		ops.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		body := rec.Body.String()
		if metricValue(body, `serpent_account_limits_refused{account="team-b"}`) != 1 || metricValue(body, `serpent_account_max_in_flight{account="team-b"}`) != 1 {
			return errors.New("the refused value and the kept cap not shown yet")
		}
		return nil
	})
}

// accountsKV is serp_accounts, as the engine reads it.
func accountsKV(t testing.TB, js jetstream.JetStream) *snats.KV {
	t.Helper()
	kv, err := snats.OpenKV(context.Background(), js, snats.AccountsBucket)
	require.NoError(t, err)
	return kv
}
