package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPlainHTTPRefusalNeverQuotesTheToken: README (Security): "An API URL
// that carries the token (as user info, a query or a fragment) is refused
// without quoting it." A plain http:// URL on another machine is refused
// before the client could redact it: the refusal names its scheme and
// host alone, for serpent run --api-url and serpent audit --ledger.
func TestPlainHTTPRefusalNeverQuotesTheToken(t *testing.T) {
	const tok = "tok_abcdefgh12345"
	env := map[string]string{"SERPER_LIVE_TOKEN": tok}
	for _, u := range []string{"http://" + tok + "@api.example.com", "http://api.example.com/?key=" + tok, "http://api.example.com/#" + tok} {
		t.Run("run "+u[:20], func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), []string{"run", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "", "--api-url", u},
				func(k string) string { return env[k] }, &stdout, &stderr)
			require.ErrorIs(t, err, errUsage)
			require.NotContains(t, err.Error(), tok)
			require.NotContains(t, stdout.String()+stderr.String(), tok)
		})
		t.Run("audit --ledger "+u[:20], func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), []string{"audit", "--events", filepath.Join(auditDir, "clean.jsonl"),
				"--now", "2026-12-02T15:42:45Z", "--ledger", u}, func(k string) string { return env[k] }, &stdout, &stderr)
			require.ErrorIs(t, err, errUsage)
			require.NotContains(t, err.Error(), tok)
			require.NotContains(t, stdout.String()+stderr.String(), tok)
		})
	}
}
