package chaos

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSpellingsMakeOneJob: every command a run draws, each duplicate in its
// other spelling, maps to the job drawn for its observation; a command
// that maps elsewhere, or a run that made more jobs than observations, is
// a broken promise 1 (the engine's own rules would agree with themselves).
func TestSpellingsMakeOneJob(t *testing.T) {
	cfg := Config{Seed: 7, Jobs: 30, Duplicates: 1, Malformed: 8, Spread: time.Minute}
	cmds := commands(cfg, time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), rand.New(rand.NewPCG(7, 7)))
	jobs := map[string]bool{}
	for _, c := range cmds {
		job := JobOf(c.payload)
		require.Empty(t, spelling(c, job), "%s", c.payload)
		if job != "" {
			jobs[job] = true
		}
	}
	require.Len(t, jobs, cfg.Jobs)
	require.Empty(t, observations(cmds, len(jobs)))

	dup := cmds[0]
	for _, c := range cmds {
		if c.job != "" {
			dup = c
		}
	}
	require.Contains(t, spelling(dup, "0123456789abcdef0123456789abcdef"), "promise 1")
	require.Contains(t, observations(cmds, len(jobs)+1), "30 observations were ordered and 31 jobs made of them")
}

// TestLogsHoldingTheTokenAreReported: a process log that holds the run's
// token is a broken promise 8; the token is the run's own secret.
func TestLogsHoldingTheTokenAreReported(t *testing.T) {
	r := &run{dir: t.TempDir(), token: secretToken(), rep: newReport(Config{})}
	require.NotEqual(t, r.token, secretToken())
	require.NoError(t, os.MkdirAll(filepath.Join(r.dir, "logs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "logs", "w1.log"), []byte("all quiet\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "logs", "w2.log"), []byte("sent with Bearer "+r.token+"\n"), 0o644))
	r.logsHoldToken()
	require.Equal(t, []string{"the log w2.log holds the API token (promise 8)"}, r.rep.Violations)
}
