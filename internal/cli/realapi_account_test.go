package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/stretchr/testify/require"
)

// runUntilReadyOrError starts serpent run and reports its error, or nil
// with started=true once it says it is ready (then it is stopped).
func runUntilReadyOrError(t *testing.T, env map[string]string, args ...string) (started bool, err error, stdout string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, append(testRunArgs(), args...), func(k string) string { return env[k] }, out, errOut)
	}()
	var runErr error
	ended := false
	natstest.WaitFor(t, 20*time.Second, func() error {
		select {
		case runErr = <-done:
			ended = true
			return nil
		default:
		}
		if strings.Contains(out.String(), "ready with") {
			return nil
		}
		return errors.New("not yet")
	})
	if !ended {
		cancel()
		<-done
		return true, nil, out.String()
	}
	return false, runErr, out.String()
}

// TestAccountAtTheRealAPIKeepsItsRules: without
// SERPER_LIVE_TOKEN the default account is the built-in sandbox, where
// short client timeouts are allowed. An --accounts entry at the real API
// with a token of its own buys real searches, and is held to the real
// API's rules: no short client timeout (a running, billed search would be
// cut into an unknown outcome), a lease that covers the client's timeout,
// a replay window within the API's.
func TestAccountAtTheRealAPIKeepsItsRules(t *testing.T) {
	for name, extra := range map[string][]string{
		"a 5 s client timeout":                      {"--client-timeout", "5s", "--lease", "6s"},
		"a lease shorter than the client's 100 s":   {"--lease", "30s"},
		"a replay window longer than the API's 15m": {"--replay-window", "20m"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "accounts.json")
			require.NoError(t, os.WriteFile(file, []byte(`[{"name":"team-b","base_url":"https://api.serper.live","token_env":"TEAM_TOKEN"}]`), 0o600))
			env := map[string]string{"TEAM_TOKEN": "tok_team_987654321"}
			args := append([]string{"--data", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0",
				"--http", "", "--log-level", "warn", "--accounts", file}, extra...)
			started, err, out := runUntilReadyOrError(t, env, args...)
			require.False(t, started, "the engine started and buys real searches for team-b with %v:\n%s", extra, out)
			require.ErrorIs(t, err, errUsage)
		})
	}
}
