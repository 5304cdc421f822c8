package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// canaryToken is a recognisable API token: the leak test looks for it
// everywhere serpent writes.
const canaryToken = "tok_CANARY_7f3a9c2e51b84d06aa"

// tokenForms are the token as it could leak: plain, hex, and base64 in
// every alphabet, alone and as the Authorization header value.
func tokenForms(tok string) []string {
	forms := []string{tok, hex.EncodeToString([]byte(tok))}
	for _, s := range []string{tok, "Bearer " + tok} {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			forms = append(forms, enc.EncodeToString([]byte(s)))
		}
	}
	return forms
}

// requireNoToken fails if any form of the token is in text.
func requireNoToken(t *testing.T, where, text string) {
	t.Helper()
	for _, f := range tokenForms(canaryToken) {
		if i := strings.Index(text, f); i >= 0 {
			t.Fatalf("the API token (as %q) leaked into %s: ...%s...", f, where, text[max(i-80, 0):min(i+len(f)+80, len(text))])
		}
	}
}

// streamContents reads every message of every stream (KV buckets are
// streams too): subjects, headers and data.
func streamContents(t *testing.T, js jetstream.JetStream) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	names := js.StreamNames(ctx)
	for name := range names.Name() {
		s, err := js.Stream(ctx, name)
		require.NoError(t, err)
		info, err := s.Info(ctx)
		require.NoError(t, err)
		var b strings.Builder
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := s.GetMsg(ctx, seq)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			require.NoError(t, err)
			fmt.Fprintf(&b, "%s %v %s\n", m.Subject, m.Header, m.Data)
		}
		out[name] = b.String()
	}
	require.NoError(t, names.Err())
	return out
}

// kvContents reads the current value of every key of every KV bucket.
func kvContents(t *testing.T, js jetstream.JetStream) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	buckets := js.KeyValueStoreNames(ctx)
	for name := range buckets.Name() {
		kv, err := js.KeyValue(ctx, name)
		require.NoError(t, err)
		keys, err := kv.ListKeys(ctx)
		require.NoError(t, err)
		var b strings.Builder
		for k := range keys.Keys() {
			if e, err := kv.Get(ctx, k); err == nil {
				fmt.Fprintf(&b, "%s=%s\n", k, e.Value())
			}
		}
		out[name] = b.String()
	}
	return out
}

// TestTokenNeverLeaks runs the engine end to end with a recognisable
// token against a sandbox that accepts only it, under faults that make it
// log, retry and reconcile, and then looks for the token in every event,
// stream message, KV value, log line, the /metrics body, the status page,
// the readiness report, the audit's output and the errors of commands
// that fail: it is in none of them. It also checks that every log line
// about a job names the job and the first 8 characters of its key.
func TestTokenNeverLeaks(t *testing.T) {
	t.Parallel()
	sb := sandbox.New(sandbox.Config{Token: canaryToken, Seed: 5, SearchTime: 2 * time.Millisecond,
		ReplayWindow: 3 * time.Second, Faults: sandbox.Faults{DropAfterSearch: 0.2, GatewayPage504: 0.1, Timeout408: 0.1,
			EarlyExpiry: 0.3, Unavailable503: 0.1}})
	sbURL, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	env := map[string]string{"SERPER_LIVE_TOKEN": canaryToken}
	r := startEngine(t, env, "--data", filepath.Join(t.TempDir(), "data"), "--nats-listen", "127.0.0.1:0",
		"--http", "127.0.0.1:0", "--sandbox-url", sbURL, "--log-format", "json", "--log-level", "debug",
		"--replay-window", "3s", "--safety-margin", "1s", "--lease", "2s", "--client-timeout", "1s",
		"--base-delay", "20ms", "--max-delay", "200ms")
	base := r.opsURL(t)
	_, js := natstest.Connect(t, r.natsURL)
	const jobs = 30
	publishJobs(t, js, "leak check", jobs)
	metricsBody := waitFinished(t, base, jobs)
	require.Positive(t, sb.Stats().Faults["drop_after_search"]+sb.Stats().Faults["early_expiry"], "faults happened: %v", sb.Stats().Faults)

	texts := map[string]string{"/metrics": metricsBody, "engine stdout": r.stdout.String()}
	_, texts["status page"] = get(t, base+"/")
	_, texts["/readyz"] = get(t, base+"/readyz")
	for name, text := range streamContents(t, js) {
		texts["stream "+name] = text
	}
	for name, text := range kvContents(t, js) {
		texts["bucket "+name] = text
	}
	require.Contains(t, texts, "stream SERP_EVENTS")
	require.Contains(t, texts, "bucket serp_status")

	// Commands that use the token: the audit joining the ledger, and runs
	// refused for their settings.
	var out, errOut bytes.Buffer
	auditEnv := map[string]string{"NATS_URL": r.natsURL, "SERPER_LIVE_TOKEN": canaryToken}
	err = Run(context.Background(), []string{"audit", "--ledger", sbURL, "--progress=false"}, func(k string) string { return auditEnv[k] }, &out, &errOut)
	texts["audit output"] = out.String() + errOut.String() + fmt.Sprint(err)
	for _, args := range [][]string{
		{"audit", "--ledger", "http://127.0.0.1:1", "--progress=false"},
		{"run", "--nats-listen", "127.0.0.1:0", "--http", "", "--client-timeout", "10s"},
		{"run", "--nats-listen", "127.0.0.1:0", "--http", "", "--lease", "30s"},
	} {
		out.Reset()
		errOut.Reset()
		err := Run(context.Background(), append(args, "--data", t.TempDir()), func(k string) string { return auditEnv[k] }, &out, &errOut)
		require.Error(t, err, "%v", args)
		texts[fmt.Sprintf("error of %v", args[:2])] += err.Error() + out.String() + errOut.String()
	}

	r.stop(t)
	texts["engine stderr (logs)"] = r.stderr.String()
	for where, text := range texts {
		requireNoToken(t, where, text)
	}
	checkJobLogLines(t, r.stderr.String())
}

var keyPrefixRE = regexp.MustCompile(`^[0-9a-f]{8}$`)

// checkJobLogLines: the engine's log is JSON, one object per line, and
// every line about a job carries the job id and the first 8 characters of
// its current key.
func checkJobLogLines(t *testing.T, logs string) {
	t.Helper()
	lines, withJob := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), "a log line that is not JSON: %s", line)
		lines++
		job, ok := rec["job"].(string)
		if !ok {
			continue
		}
		withJob++
		require.Regexp(t, `^[0-9a-f]{32}$`, job, "job id in: %s", line)
		key, _ := rec["key"].(string)
		if rec["level"] == "DEBUG" && rec["msg"] == "command scheduled" {
			// Intake's debug line names the command's sequence and the
			// job, not yet its key (engine/intake_run.go).
			continue
		}
		require.Regexp(t, keyPrefixRE, key, "a line about a job without its key prefix: %s", line)
	}
	require.Positive(t, withJob, "the fault mix makes the engine log about jobs (%d lines)", lines)
}
