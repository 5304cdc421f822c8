package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAccountAtTheDefaultSandboxIsNotTheRealAPI: with --sandbox-url on
// another machine (docker-compose.yml's http://sandbox:8790) and
// the sandbox's short client timeout, an --accounts entry naming that
// same sandbox as its base_url (no token of its own: it is not "another
// address", so it is allowed one) is the sandbox, not the real API. It
// must neither be held to the real API's rules nor announced as buying
// real searches.
func TestAccountAtTheDefaultSandboxIsNotTheRealAPI(t *testing.T) {
	const sb = "http://sandbox.example:8790"
	dir := t.TempDir()
	file := filepath.Join(dir, "accounts.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"name":"team-b","base_url":"`+sb+`"}]`), 0o600))
	started, err, out := runUntilReadyOrError(t, nil, "--data", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0",
		"--http", "", "--log-level", "warn", "--sandbox-url", sb, "--client-timeout", "10s", "--lease", "20s", "--accounts", file)
	require.NoError(t, err)
	require.True(t, started, out)
	require.False(t, strings.Contains(out, "real searches are bought"), out)
}
