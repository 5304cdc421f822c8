package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/service"
	"github.com/serpent-engine/serpent/projections"
	"github.com/stretchr/testify/require"
)

// cli runs one serpent command against the engine's NATS.
func cli(t *testing.T, natsURL string, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := map[string]string{"NATS_URL": natsURL}
	err := Run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	return stdout.String(), err
}

// TestUpstreamAndOperatorPaths: a job scheduled with "serpent schedule",
// looked at and steered through the micro service, as an upstream system
// and an operator would.
func TestUpstreamAndOperatorPaths(t *testing.T) {
	r := startEngine(t, nil, "--data", filepath.Join(t.TempDir(), "data"), "--nats-listen", "127.0.0.1:0",
		"--http", "127.0.0.1:0", "--log-level", "warn")
	nc, _ := natstest.Connect(t, r.natsURL)

	out, err := cli(t, r.natsURL, "schedule", "--query", "espresso scale", "--device", "mobile", "--slot", "2026-12-02T14:00:00Z")
	require.NoError(t, err)
	job := strings.TrimSpace(out)
	require.Regexp(t, `^[0-9a-f]{32}$`, job)
	again, err := cli(t, r.natsURL, "schedule", "--query", "  espresso   scale ", "--device", "MOBILE", "--slot", "2026-12-02T15:00:00+01:00")
	require.NoError(t, err)
	require.Equal(t, job, strings.TrimSpace(again), "the same observation is the same job")

	_, err = cli(t, r.natsURL, "schedule", "--query", "x", "--country", "USA")
	require.ErrorIs(t, err, errUsage)
	require.ErrorContains(t, err, "country")
	_, err = cli(t, r.natsURL, "schedule", "--query", "x", "--limit", "0")
	require.ErrorIs(t, err, errUsage, "--limit 0 is refused, not taken for 10")
	require.ErrorContains(t, err, "limit: 0 is outside 1..100")
	out, err = cli(t, r.natsURL, "schedule", "--query", "x", "--country", "USA", "--no-validate")
	require.NoError(t, err)
	require.Contains(t, out, "not validated")

	// The micro service: discoverable, and it answers status.
	ping, err := nc.Request("$SRV.PING."+service.Name, nil, 5*time.Second)
	require.NoError(t, err)
	var id micro.Ping
	require.NoError(t, json.Unmarshal(ping.Data, &id))
	require.Equal(t, service.Name, id.Name)
	natstest.WaitFor(t, 20*time.Second, func() error {
		msg, err := nc.Request(service.Prefix+".status", []byte(job), 5*time.Second)
		if err != nil {
			return err
		}
		var v projections.JobView
		if err := json.Unmarshal(msg.Data, &v); err != nil {
			return err
		}
		if v.Status != "succeeded" {
			return fmt.Errorf("job is %s", v.Status)
		}
		require.NotNil(t, v.Result)
		return nil
	})

	// Scheduling request-reply: the job id, or a JSON error naming the field.
	msg, err := nc.Request(service.Prefix+".schedule",
		[]byte(`{"slot":"2026-12-02T16:00:00Z","query":"grinder","country":"DE","language":"de","device":"desktop"}`), 5*time.Second)
	require.NoError(t, err)
	var sched engine.Scheduled
	require.NoError(t, json.Unmarshal(msg.Data, &sched))
	require.True(t, sched.Created)
	msg, err = nc.Request(service.Prefix+".schedule", []byte(`{"slot":"2026-12-02T16:00:00Z","query":"grinder","country":"DE","language":"deutsch","device":"desktop"}`), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "400", msg.Header.Get(micro.ErrorCodeHeader))
	var serr service.ErrorBody
	require.NoError(t, json.Unmarshal(msg.Data, &serr))
	require.Equal(t, "invalid_language", serr.Reason)
	msg, err = nc.Request(service.Prefix+".status", []byte("0123456789abcdef0123456789abcdef"), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "404", msg.Header.Get(micro.ErrorCodeHeader))
	for _, bad := range []string{"Job 1", "a.b", "*"} { // not a job id: the caller's mistake, not the server's
		for _, op := range []string{".status", ".cancel", ".repurchase"} {
			msg, err = nc.Request(service.Prefix+op, []byte(bad), 5*time.Second)
			require.NoError(t, err)
			require.Equal(t, "400", msg.Header.Get(micro.ErrorCodeHeader), "%s %q", op, bad)
		}
	}

	// Operators: a finished job cannot be cancelled; nor bought again.
	_, err = cli(t, r.natsURL, "cancel", job, "--by", "ops", "--reason", "test")
	require.ErrorContains(t, err, "finished")
	require.Equal(t, 1, ExitCode(err))
	_, err = cli(t, r.natsURL, "repurchase", job, "--by", "ops", "--reason", "test")
	require.ErrorContains(t, err, "only a charged_no_result job")
	_, err = cli(t, r.natsURL, "repurchase", job, "--by", "ops", "--reason", "test", "--repurchases", "1")
	require.ErrorContains(t, err, "re-purchases so far: 0, not the 1 given")
	_, err = cli(t, r.natsURL, "cancel", "NOPE", "--by", "ops", "--reason", "test")
	require.ErrorContains(t, err, "NOPE", "the reason, not only \"bad request\"")
	require.NotRegexp(t, `cancel NOPE: bad request \(400\)$`, err.Error())

	// Health.
	m := regexp.MustCompile(`health on (http://\S+)`).FindStringSubmatch(r.stdout.String())
	require.NotNil(t, m)
	resp, err := http.Get(m[1])
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok\n", string(body))
}

// TestRunRefusesBadSettings: mistakes in how the engine is started are
// usage errors that say what to fix, before anything starts.
func TestRunRefusesBadSettings(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"short lease for the real API":   {[]string{"--lease", "30s"}, map[string]string{"SERPER_LIVE_TOKEN": "tok_abcdefgh12345"}, "--lease"},
		"client timeout under 100 s":     {[]string{"--client-timeout", "95s"}, map[string]string{"SERPER_LIVE_TOKEN": "tok_abcdefgh12345"}, "90"},
		"api url without a token":        {[]string{"--api-url", "https://example.com"}, nil, "no token"},
		"the token in clear text":        {[]string{"--api-url", "http://api.example.com"}, map[string]string{"SERPER_LIVE_TOKEN": "tok_abcdefgh12345"}, "clear text"},
		"margin as long as the window":   {[]string{"--safety-margin", "15m"}, nil, "safety_margin"},
		"a window longer than the API's": {[]string{"--replay-window", "20m"}, map[string]string{"SERPER_LIVE_TOKEN": "tok_abcdefgh12345"}, "longer than the API's"},
		"a margin shorter than a write":  {[]string{"--safety-margin", "5s"}, map[string]string{"SERPER_LIVE_TOKEN": "tok_abcdefgh12345"}, "--safety-margin"},
		"bad log level":                  {[]string{"--log-level", "loud"}, nil, "--log-level"},
		"bad rules file":                 {[]string{"--outcome-rules", "/no/such/file"}, nil, "--outcome-rules"},
		"an argument":                    {[]string{"now"}, nil, "no arguments"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			args := append([]string{"run", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", ""}, tc.args...)
			err := Run(context.Background(), args, func(k string) string { return tc.env[k] }, &stdout, &stderr)
			require.ErrorIs(t, err, errUsage)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "tok_abcdefgh12345")
		})
	}
}

// TestNegativeReadyMaxBehindIsRefused: with --ready-max-behind below 0
// even projections with nothing to apply (0 s behind) are "more than" the
// bound, so /readyz could never answer 200. serpent run refuses it as a
// usage error naming the flag, before anything starts.
func TestNegativeReadyMaxBehindIsRefused(t *testing.T) {
	var o opsFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	o.register(fs)
	require.NoError(t, fs.Parse([]string{"--ready-max-behind", "-1s"}))
	err := o.check()
	require.ErrorIs(t, err, errUsage)
	require.ErrorContains(t, err, "--ready-max-behind -1s is negative")

	// serpent run checks it before anything starts (its context is
	// cancelled: a run that did start would stop at once).
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	args := []string{"run", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "", "--ready-max-behind", "-1s"}
	err = Run(ctx, args, func(string) string { return "" }, &stdout, &stderr)
	require.ErrorIs(t, err, errUsage)
	require.ErrorContains(t, err, "--ready-max-behind -1s is negative")

	ok := opsFlags{readyMaxBehind: 0, maxResponseBytes: 1024}
	require.NoError(t, ok.check(), "0 is a bound: ready only when nothing is pending")
}

// TestAccountTokensStayWithTheirAddress: an account of the --accounts file
// at another address needs a token of its own (the default account's is
// not sent there), and no token goes over plain http to another machine.
func TestAccountTokensStayWithTheirAddress(t *testing.T) {
	env := map[string]string{"SERPER_LIVE_TOKEN": "tok_abcdefgh12345", "TEAM_TOKEN": "tok_team_987654321"}
	for name, tc := range map[string]struct{ accounts, want string }{
		"another address, the default token": {`[{"name":"team-b","base_url":"https://other.example"}]`, "needs a token of its own"},
		"plain http elsewhere":               {`[{"name":"team-b","base_url":"http://other.example","token_env":"TEAM_TOKEN"}]`, "clear text"},
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "accounts.json")
			require.NoError(t, os.WriteFile(file, []byte(tc.accounts), 0o600))
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), []string{"run", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "",
				"--accounts", file}, func(k string) string { return env[k] }, &stdout, &stderr)
			require.ErrorIs(t, err, errUsage)
			require.ErrorContains(t, err, tc.want)
			require.NotContains(t, err.Error(), "tok_")
		})
	}
	for raw, local := range map[string]bool{"http://127.0.0.1:8790": true, "http://localhost:1": true, "http://[::1]:2": true,
		"http://sandbox:8790": false, "https://api.serper.live": false} {
		require.Equal(t, local, onLoopback(raw), raw)
	}
	require.NoError(t, tokenTransport("https://api.serper.live"))
	require.NoError(t, tokenTransport("http://127.0.0.1:8790"))
	require.Error(t, tokenTransport("http://sandbox:8790"))
}
