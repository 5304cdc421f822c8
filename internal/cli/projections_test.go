package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
	"github.com/stretchr/testify/require"
)

// views is an engine with a few finished jobs and its projections caught
// up, for the view commands' tests.
type views struct {
	t    *testing.T
	r    *engineRun
	js   jetstream.JetStream
	jobs []string
}

func setupViews(t *testing.T) *views {
	t.Helper()
	r := startEngine(t, nil, "--data", filepath.Join(t.TempDir(), "data"), "--nats-listen", "127.0.0.1:0",
		"--http", "", "--log-level", "warn")
	_, js := natstest.Connect(t, r.natsURL)
	v := &views{t: t, r: r, js: js}
	_, err := cli(t, r.natsURL, "schedule", "--query", "x", "--country", "USA", "--no-validate") // rejected
	require.NoError(t, err)
	// A command on a subject nothing reads is rejected too.
	_, err = js.Publish(context.Background(), "serp.cmd.schedul", []byte(`{"query":"typo"}`))
	require.NoError(t, err)
	for _, q := range []string{"espresso scale", "milk jug", "tamper"} {
		out, err := cli(t, r.natsURL, "schedule", "--query", q, "--slot", "2026-12-02T14:00:00Z")
		require.NoError(t, err)
		v.jobs = append(v.jobs, strings.TrimSpace(out))
	}
	natstest.WaitFor(t, 30*time.Second, func() error {
		for _, j := range v.jobs {
			out, err := cli(t, r.natsURL, "status", j, "-o", "json")
			if err != nil {
				return err
			}
			var s statusOut
			require.NoError(t, json.Unmarshal([]byte(out), &s))
			if s.Status != "succeeded" {
				return fmt.Errorf("job %s is %s", j, s.Status)
			}
		}
		if err := v.caughtUp(); err != nil {
			return err
		}
		return v.rejected()
	})
	return v
}

func (v *views) rejected() error {
	st, err := v.js.Stream(context.Background(), snats.RejectStream)
	if err != nil {
		return err
	}
	if n := st.CachedInfo().State.Msgs; n != 2 {
		return fmt.Errorf("%d rejections", n)
	}
	return nil
}

func (v *views) caughtUp() error {
	lag, err := projector.ReadLag(context.Background(), v.js, "", time.Now())
	if err != nil {
		return err
	}
	if lag.Pending > 0 {
		return fmt.Errorf("%d events pending", lag.Pending)
	}
	return nil
}

// TestViews runs the view commands, the rebuild and the audit against one
// engine with a few finished jobs.
func TestViews(t *testing.T) {
	v := setupViews(t)
	t.Run("tables", v.tables)
	t.Run("json", v.jsonOutput)
	t.Run("rebuild and audit", v.rebuildAndAudit)
}

func (v *views) tables(t *testing.T) {
	url, job := v.r.natsURL, v.jobs[0]
	tests := []struct {
		name string
		args []string
		want []string
		code int // exit code, 0 for none
	}{
		{"one job", []string{"status", job}, []string{"status        succeeded", `"espresso scale" US/en desktop`, "key 1"}, 0},
		{"jobs by state", []string{"status", "--state", "succeeded"}, []string{"JOB", job, v.jobs[2], "3 jobs"}, 0},
		{"no job in that state", []string{"status", "--state", "reconciling"}, []string{"0 jobs"}, 0},
		{"the newest jobs", []string{"status", "--limit", "2"}, []string{"JOB", "2 of 3 jobs, the newest (--limit 0 lists every one)"}, 0},
		{"every job", []string{"status", "--limit", "0"}, []string{"3 jobs"}, 0},
		{"a bad limit", []string{"status", "--limit", "-1"}, nil, 2},
		{"a limit of one job", []string{"status", job, "--limit", "5"}, nil, 2},
		{"an unknown job", []string{"status", "0123456789abcdef0123456789abcdef"}, nil, 1},
		{"a bad state", []string{"status", "--state", "done"}, nil, 2},
		{"days", []string{"ledger"}, []string{"DAY", "SEARCHES", "EST. SPEND", "~$"}, 0},
		{"one job's purchases", []string{"ledger", "--job", job}, []string{"purchases     1 (0 re-purchases authorised)"}, 0},
		{"a bad day", []string{"ledger", "--day", "yesterday"}, nil, 2},
		{"today, the day of purchase", []string{"ledger", "--day", "today"}, []string{"DAY", time.Now().UTC().Format(time.DateOnly)}, 0},
		{"a day with no purchase", []string{"ledger", "--day", "2026-12-02"}, nil, 1},
		{"an observation", []string{"observation", job}, []string{"replayed  false", "TITLE", "espresso scale"}, 0},
		{"no observation", []string{"observation", "0123456789abcdef0123456789abcdef"}, nil, 1},
		{"lag", []string{"projections", "lag"}, []string{"pending events        0"}, 0},
		{"a bad output", []string{"status", "-o", "yaml"}, nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := cli(t, url, tt.args...)
			if tt.code != 0 {
				require.Error(t, err)
				require.Equal(t, tt.code, ExitCode(err), "%v", err)
				return
			}
			require.NoError(t, err)
			for _, w := range tt.want {
				require.Contains(t, out, w)
			}
		})
	}
}

func (v *views) jsonOutput(t *testing.T) {
	url := v.r.natsURL

	out, err := cli(t, url, "status", "-o", "json")
	require.NoError(t, err)
	var list []statusOut
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	require.Len(t, list, 3)
	require.NotContains(t, out, `"fold"`, "the runner's working state is not part of the view")
	for i := 1; i < len(list); i++ {
		require.False(t, list[i].Updated.After(list[i-1].Updated), "newest first, as the README says")
	}
	out, err = cli(t, url, "status", "-o", "json", "--limit", "1")
	require.NoError(t, err)
	var newest []statusOut
	require.NoError(t, json.Unmarshal([]byte(out), &newest), "only JSON on stdout")
	require.Equal(t, list[:1], newest)

	out, err = cli(t, url, "ledger", "-o", "json")
	require.NoError(t, err)
	var days []projections.DayLedger
	require.NoError(t, json.Unmarshal([]byte(out), &days))
	searches := 0
	for _, d := range days {
		searches += d.Searches
		require.Equal(t, int64(projections.DefaultPriceMicrosPerPage), d.PriceMicrosPerPage)
	}
	require.Equal(t, 3, searches)

	out, err = cli(t, url, "ledger", "-o", "json", "--day", days[0].Day, "--price-micros", "2000")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &days))
	require.Equal(t, int64(days[0].Pages)*2000+days[0].ChargedAmountMicros, days[0].EstSpendMicros)

	out, err = cli(t, url, "observation", v.jobs[1], "-o", "json")
	require.NoError(t, err)
	var o projections.Observation
	require.NoError(t, json.Unmarshal([]byte(out), &o))
	require.Equal(t, v.jobs[1], o.JobID)
	require.True(t, json.Valid(o.Result))
}

// rebuildAndAudit: a rebuild of correct projections changes nothing, and
// the audit of a clean run keeps every promise, also by the sandbox's
// billing ledger; twice.
func (v *views) rebuildAndAudit(t *testing.T) {
	url := v.r.natsURL
	out, err := cli(t, url, "projections", "rebuild", "--lease-ttl", "3s")
	require.NoError(t, err)
	require.Regexp(t, `rebuilt \d+ values from \d+ events .* \d+ unchanged, 0 written, 0 deleted`, out)

	for range 2 {
		out, err = cli(t, url, "audit", "--ledger", v.r.sandboxURL)
		require.NoError(t, err, out)
		require.Contains(t, out, "every promise kept")
		require.Contains(t, out, "commands        5: 3 became jobs, 2 rejected, 0 schedule operations, 0 pending at the intake, 0 stuck, 0 lost")
		require.Contains(t, out, "billing ledger  3 charges: 3 observations")
	}
	out, err = cli(t, url, "audit", "-o", "json")
	require.NoError(t, err)
	var rep struct {
		Jobs       int   `json:"jobs"`
		Violations []any `json:"violations"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Equal(t, 3, rep.Jobs)
	require.Empty(t, rep.Violations)
}
