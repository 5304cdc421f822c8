package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuditLedgerRefusesPlainHTTPElsewhere: README (Security): the
// API token goes "only over https or to this machine (a plain http:// API
// URL elsewhere is refused)". serpent audit --ledger must refuse it too.
func TestAuditLedgerRefusesPlainHTTPElsewhere(t *testing.T) {
	const token = "tok_audit_ledger_secret"
	// A server on this machine's non-loopback address stands in for
	// "another machine": onLoopback says it is not this one.
	var ip net.IP
	addrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			ip = n.IP
			break
		}
	}
	if ip == nil {
		t.Skip("no non-loopback IPv4 address")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	require.NoError(t, err)
	var sawToken atomic.Bool
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+token {
			sawToken.Store(true)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"entries":[]}`))
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + ln.Addr().String()

	env := map[string]string{"SERPER_LIVE_TOKEN": token}
	var stdout, stderr bytes.Buffer
	err = Run(context.Background(), []string{"audit", "--events", filepath.Join(auditDir, "clean.jsonl"),
		"--now", "2026-12-02T15:42:45Z", "--ledger", url}, func(k string) string { return env[k] }, &stdout, &stderr)
	require.False(t, sawToken.Load(), "the API token went in clear text over plain http to %s", url)
	require.ErrorIs(t, err, errUsage)
	require.ErrorContains(t, err, "clear text")
}
