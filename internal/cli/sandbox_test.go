package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// lockedBuffer is a bytes.Buffer the command's logger and the test can share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sandboxRun is a "serpent sandbox" running in the background.
type sandboxRun struct {
	url    string
	stderr *lockedBuffer
	stop   func() error // cancels the context and returns run's error
}

// startSandbox runs "serpent sandbox args..." with env until the test ends
// and returns the URL it printed on stdout.
func startSandbox(t *testing.T, env map[string]string, args ...string) *sandboxRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	stderr := &lockedBuffer{}
	done := make(chan error, 1)
	go func() {
		err := Run(ctx, append([]string{"sandbox", "--listen", "127.0.0.1:0"}, args...),
			func(k string) string { return env[k] }, outW, stderr)
		_ = outW.CloseWithError(io.EOF)
		done <- err
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	require.NoError(t, err, "stderr: %s", stderr.String())
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return &sandboxRun{url: strings.TrimSpace(line), stderr: stderr, stop: stop}
}

func TestSandboxHelpListsEveryFlag(t *testing.T) {
	for _, args := range [][]string{{"sandbox", "-h"}, {"sandbox", "--help"}, {"help", "sandbox"}} {
		_, stderr, err := runCmd(t, args...)
		require.NoError(t, err, "help is not an error")
		require.Contains(t, stderr, "Usage: serpent sandbox")
		fs, _, _, _, _ := sandboxFlags(io.Discard)
		fs.VisitAll(func(f *flag.Flag) {
			require.Contains(t, stderr, "-"+f.Name, "help lists -%s", f.Name)
			require.Contains(t, stderr, f.Usage)
		})
	}
}

func TestSandboxUsageErrors(t *testing.T) {
	dir := t.TempDir()
	badFile := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(badFile, []byte(`{"faults":{"dropAfter":1}}`), 0o600))
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--nope"}, "flag provided but not defined"},
		{"argument", []string{"extra"}, "takes no arguments"},
		{"probability over 1", []string{"--fault-502", "1.5"}, "gateway_page_502 has probability 1.5"},
		{"negative window", []string{"--replay-window", "-1m"}, "replayWindow -1m0s is negative"},
		{"negative billing delay", []string{"--billing-delay", "-1s"}, "billingDelay -1s is negative"},
		{"billing-late over 1", []string{"--fault-billing-late", "2"}, "billing_late has probability 2"},
		{"missing config file", []string{"--config", filepath.Join(dir, "none.json")}, "no such file"},
		{"misspelt fault in config", []string{"--config", badFile}, `unknown field "dropAfter"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := runCmd(t, append([]string{"sandbox"}, tt.args...)...)
			require.ErrorIs(t, err, errUsage)
			require.Equal(t, 2, ExitCode(err))
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestSandboxServesTheAPI(t *testing.T) {
	const token = "sk_env_token_never_printed"
	sb := startSandbox(t, map[string]string{serper.TokenEnv: token}, "--seed", "3", "--search-time", "0", "--free-pages", "1")
	require.Regexp(t, `^http://127\.0\.0\.1:\d+$`, sb.url)

	client, err := serper.New(serper.Config{BaseURL: sb.url, Token: token})
	require.NoError(t, err)
	defer client.CloseIdleConnections()
	key := uuid.NewString()
	res := client.Search(context.Background(), key, []byte(`{"query":"espresso scale","limit":20}`))
	require.True(t, res.OK(), "%+v", res)
	require.Equal(t, 2, res.Pages)
	entries, err := client.Ledger(context.Background(), serper.LedgerQuery{Keys: []string{key}})
	require.NoError(t, err)
	require.Len(t, entries, 1)
	require.Equal(t, 1, entries[0].FreePages)

	req, err := http.NewRequest(http.MethodGet, sb.url+"/v1/sandbox/stats", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	require.NoError(t, err)
	var st sandbox.Stats
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	require.NoError(t, resp.Body.Close())
	require.Equal(t, 1, st.Executions)
	require.Equal(t, 1, st.Charges)

	require.NoError(t, sb.stop(), "a cancelled context is a clean stop")
	log := sb.stderr.String()
	require.Contains(t, log, "accepting the token from $SERPER_LIVE_TOKEN")
	require.Contains(t, log, "sandbox: stopped")
	require.NotContains(t, log, token)
}

func TestSandboxDefaultTokenNotice(t *testing.T) {
	sb := startSandbox(t, nil)
	require.NoError(t, sb.stop())
	require.Contains(t, sb.stderr.String(), `accepting the fixed sandbox token "sandbox-token"`)
}

func TestSandboxConfigFileAndFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandbox.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"token":"file-token-1234","searchTime":"0s",
		"faults":{"timeout408":1,"gatewayPage502":1}}`), 0o600))
	sb := startSandbox(t, map[string]string{serper.TokenEnv: "env-token-ignored"}, "--config", path, "--fault-502", "0")
	client, err := serper.New(serper.Config{BaseURL: sb.url, Token: "file-token-1234", Timeout: 5 * time.Second, AllowShortTimeout: true})
	require.NoError(t, err)
	defer client.CloseIdleConnections()
	res := client.Search(context.Background(), uuid.NewString(), []byte(`{"query":"espresso scale"}`))
	require.True(t, res.Confirmed, "the flag switched the file's 502 off: %+v", res)
	require.Equal(t, serper.CodeSearchTimeout, res.Code, "the file's 408 fault is on")
	require.NoError(t, sb.stop())
	require.Contains(t, sb.stderr.String(), "accepting the token given by --token or --config")
	require.NotContains(t, sb.stderr.String(), "file-token-1234")
}

// TestSandboxBillingLate: --fault-billing-late and --billing-delay reach the
// sandbox (the config file's billingDelay is overridden by the flag): the
// first answer is billing_unavailable and the ledger is empty.
func TestSandboxBillingLate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sandbox.json")
	require.NoError(t, os.WriteFile(path, []byte(`{"searchTime":"0s","billingDelay":"1s","faults":{"billingLate":1}}`), 0o600))
	sb := startSandbox(t, nil, "--config", path, "--billing-delay", "1h")
	client, err := serper.New(serper.Config{BaseURL: sb.url, Token: sandbox.DefaultToken, Timeout: 5 * time.Second, AllowShortTimeout: true})
	require.NoError(t, err)
	defer client.CloseIdleConnections()
	key := uuid.NewString()
	res := client.Search(context.Background(), key, []byte(`{"query":"espresso scale"}`))
	require.Equal(t, serper.CodeBillingUnavailable, res.Code, "%+v", res)
	entries, err := client.Ledger(context.Background(), serper.LedgerQuery{Keys: []string{key}})
	require.NoError(t, err)
	require.Empty(t, entries, "charged an hour after the search")
	require.Equal(t, serper.CodeBillingUnavailable, client.Search(context.Background(), key, []byte(`{"query":"espresso scale"}`)).Code)
	require.NoError(t, sb.stop())
	require.Contains(t, sb.stderr.String(), "BillingDelay: 1h0m0s")
}

func TestSandboxListenError(t *testing.T) {
	_, _, err := runCmd(t, "sandbox", "--listen", "256.0.0.1:99999")
	require.ErrorContains(t, err, "listen on 256.0.0.1:99999")
}
