package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/chaos"
)

// TestChaosCommand runs a tiny "serpent chaos" end to end (it builds the
// binary it starts) and reads its JSON report.
func TestChaosCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	// The command's wiring, small: chaos.Run has its own test, and CI runs
	// serpent chaos at full size.
	err := Run(ctx, []string{"chaos", "-o", "json", "--jobs", "15", "--malformed", "3", "--workers", "2",
		"--publish-for", "2s", "--spread", "3s", "--chaos-for", "8s", "--settle", "60s",
		"--kill-every", "2s", "--pause-every", "3s", "--nats-restart-every", "4s", "--naive-jobs", "30",
		"--dir", t.TempDir()}, func(string) string { return "" }, &stdout, &stderr)
	require.NoError(t, err, "stderr:\n%s", stderr.String())
	var rep chaos.Report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep), stdout.String())
	require.Equal(t, 15, rep.Jobs)
	require.Empty(t, rep.Violations)
	require.Zero(t, rep.DuplicateCharges)
	require.NotNil(t, rep.Naive)
	require.Contains(t, stderr.String(), "faults stop")
}

func TestChaosUsage(t *testing.T) {
	for _, args := range [][]string{
		{"chaos", "-o", "xml"},
		{"chaos", "--jobs", "0"},
		{"chaos", "--lease", "1s", "--client-timeout", "2s"},
		{"chaos", "--fault-408", "2"},
		{"chaos", "now"},
	} {
		_, _, err := runCmd(t, args...)
		require.Error(t, err, args)
		require.Equal(t, 2, ExitCode(err), "%v: %v", args, err)
	}
	_, usage, err := runCmd(t, "chaos", "-h")
	require.NoError(t, err)
	require.Contains(t, usage, "SIGKILL")
}

// TestChaosReportExitCode: a report with a broken promise is printed, and
// the command exits 1 (not 2: it ran fine and found a problem).
func TestChaosReportExitCode(t *testing.T) {
	for _, output := range []string{"text", "json"} {
		var out bytes.Buffer
		err := printChaosReport(&chaos.Report{Violations: []string{"job x was charged 2 times (promise 2)"}}, output, &out)
		require.Equal(t, 1, ExitCode(err))
		require.Contains(t, out.String(), "job x was charged 2 times")
		var buf bytes.Buffer
		require.NoError(t, printChaosReport(&chaos.Report{}, output, &buf))
	}
}
