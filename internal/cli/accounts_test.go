package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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

// TestAccountsCommand: an engine with two API accounts, one with limits
// from the accounts file; jobs bound to each; a limit changed from the
// shell while the engine runs.
func TestAccountsCommand(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "accounts.json")
	require.NoError(t, os.WriteFile(file, []byte(`[{"name":"team-b","limits":{"max_in_flight":2,"daily_pages":100}}]`), 0o644))
	r := startEngine(t, nil, "--data", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0", "--http", "",
		"--accounts", file, "--log-level", "warn")
	require.Contains(t, r.stdout.String(), "2 API accounts: default, team-b")
	nc, _ := natstest.Connect(t, r.natsURL)

	var jobs []string
	for _, acct := range []string{"", "team-b"} {
		msg, err := nc.Request(service.Prefix+".schedule", []byte(fmt.Sprintf(
			`{"slot":"2026-12-02T14:00:00Z","query":"grinder %s","country":"US","language":"en","device":"mobile","account":%q}`, acct, acct)), 5*time.Second)
		require.NoError(t, err)
		require.Empty(t, msg.Header.Get(micro.ErrorCodeHeader), string(msg.Data))
		var s engine.Scheduled
		require.NoError(t, json.Unmarshal(msg.Data, &s))
		jobs = append(jobs, s.JobID)
	}
	msg, err := nc.Request(service.Prefix+".schedule",
		[]byte(`{"slot":"2026-12-02T14:00:00Z","query":"q","country":"US","language":"en","device":"mobile","account":"team-z"}`), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "400", msg.Header.Get(micro.ErrorCodeHeader))
	require.Contains(t, string(msg.Data), "invalid_account")
	// A schedule for it is refused when created, not slot by slot at intake.
	_, err = cli(t, r.natsURL, "schedules", "create", "--id", "team-z-daily", "--schedule", "@daily", "--query", "q",
		"--account", "team-z")
	require.ErrorContains(t, err, `"team-z" is not an account of this engine`)

	for _, j := range jobs {
		natstest.WaitFor(t, 20*time.Second, func() error {
			msg, err := nc.Request(service.Prefix+".status", []byte(j), 5*time.Second)
			if err != nil {
				return err
			}
			var v projections.JobView
			if err := json.Unmarshal(msg.Data, &v); err != nil || v.Status != "succeeded" {
				return fmt.Errorf("job %s: %s %v", j, v.Status, err)
			}
			return nil
		})
	}

	out, err := cli(t, r.natsURL, "accounts")
	require.NoError(t, err)
	require.Contains(t, out, "team-b")
	require.Contains(t, out, "100 pages a day")
	require.Contains(t, out, "1 pages")

	out, err = cli(t, r.natsURL, "accounts", "set", "team-b", "--max-in-flight", "5", "--rate", "2.5", "--burst", "3")
	require.NoError(t, err)
	line := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "team-b") {
			line = l
		}
	}
	require.Contains(t, line, "0 of 5")
	require.Contains(t, line, "2.5/s, burst 3")
	require.Contains(t, line, "100 pages a day", "limits not given are kept")

	out, err = cli(t, r.natsURL, "accounts", "-o", "json")
	require.NoError(t, err)
	var st []engine.AccountStatus
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	require.NotEmpty(t, st)
	_, err = cli(t, r.natsURL, "accounts", "set", "team-b", "--max-in-flight", "5000")
	require.ErrorIs(t, err, errUsage)
}
