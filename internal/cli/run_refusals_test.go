package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/stretchr/testify/require"
)

// TestAccountsLimitFlagsWithoutSet: "serpent accounts
// --max-in-flight 4", the "set ACCOUNT" forgotten, is a usage error, not
// a listing that leaves the operator believing a limit holds.
func TestAccountsLimitFlagsWithoutSet(t *testing.T) {
	srv := natstest.RunServer(t)
	require.NoError(t, snats.EnsureEngineStreams(context.Background(), srv.JS, snats.StreamOptions{Replicas: 1}, 30*time.Second))
	out, err := cli(t, srv.URL, "accounts", "--max-in-flight", "4", "--daily-pages", "100")
	require.ErrorIs(t, err, errUsage, "the limit flags were ignored; output:\n%s", out)
}

// TestWorkersBelowOneAreRefused: --workers 0 (or below) is refused: the
// engine would say "ready with 0 slots" and work 8 jobs at once
// (the engine's default), buying where it was meant not to.
func TestWorkersBelowOneAreRefused(t *testing.T) {
	for _, n := range []string{"0", "-3"} {
		t.Run(n, func(t *testing.T) {
			dir := t.TempDir()
			started, err, out := runUntilReadyOrError(t, nil, "--data", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0",
				"--http", "", "--log-level", "warn", "--workers", n)
			if started {
				require.False(t, strings.Contains(out, "ready with "+n+" slots"), "said %q slots, runs 8:\n%s", n, out)
			}
			require.ErrorIs(t, err, errUsage)
		})
	}
}

// TestSandboxConfigIsRefusedWithoutTheBuiltInSandbox: --sandbox-config
// configures the built-in sandbox; with SERPER_LIVE_TOKEN also in the
// environment there is none, and the engine refuses to start rather than
// drop the flag and buy from the real API.
func TestSandboxConfigIsRefusedWithoutTheBuiltInSandbox(t *testing.T) {
	dir := t.TempDir()
	sb := filepath.Join(dir, "sandbox.json")
	require.NoError(t, os.WriteFile(sb, []byte(`{"seed":7,"searchTime":"2ms"}`), 0o644))
	env := map[string]string{"SERPER_LIVE_TOKEN": "tok_abcdefgh12345"}
	started, err, out := runUntilReadyOrError(t, env, "--data", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0",
		"--http", "", "--log-level", "warn", "--sandbox-config", sb)
	require.False(t, started, "--sandbox-config ignored, the real API used:\n%s", out)
	require.ErrorIs(t, err, errUsage)
}

// TestRunNeverPrintsTheTokenOfABadAPIURL: a refused --api-url
// that carries the token must not put it on stdout or in the error.
func TestRunNeverPrintsTheTokenOfABadAPIURL(t *testing.T) {
	const tok = "tok_abcdefgh12345"
	for _, u := range []string{"https://" + tok + "@api.example.com", "https://api.example.com/?key=" + tok} {
		var stdout, stderr bytes.Buffer
		env := map[string]string{"SERPER_LIVE_TOKEN": tok}
		err := Run(context.Background(), []string{"run", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "", "--api-url", u},
			func(k string) string { return env[k] }, &stdout, &stderr)
		require.ErrorIs(t, err, errUsage)
		require.NotContains(t, err.Error(), tok)
		require.NotContains(t, stdout.String(), tok)
		require.NotContains(t, stderr.String(), tok)
	}
}
