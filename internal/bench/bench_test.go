package bench_test

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/internal/bench"
	"github.com/serpent-engine/serpent/internal/cli"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
)

// TestBenchEveryPhase runs every phase small, the engine of the scale phase
// from a serpent binary built for the test, and checks that the JSON has
// every figure. It asserts no timing: only that things were measured.
func TestBenchEveryPhase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine end to end and builds the serpent binary")
	}
	bin, env := buildSerpent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := cli.Run(ctx, []string{"bench", "--jobs", "100", "--raw", "100", "--phases", "raw,happy,steady,replay,scale",
		"--steady-jobs", "30", "--steady-rate", "200", "--steady-search-time", "20ms", "--scale-jobs", "1000", "--scale-small", "300",
		"--scale-loads", "500", "--scale-engine-jobs", "100",
		"-o", "json", "--progress=false"}, env, &stdout, &stderr)
	require.NoError(t, err, "stderr: %s", stderr.String())

	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &keys), stdout.String())
	for _, k := range []string{"machine", "phases", "raw", "happy_path", "steady", "replay", "scale", "memory", "ratios"} {
		require.Contains(t, keys, k)
	}
	require.NotContains(t, keys, "faults", "the faults phase was not asked for")
	var rep bench.Report
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep))
	require.Equal(t, []string{"raw", "happy", "steady", "replay", "scale"}, rep.Phases)

	require.Positive(t, rep.Raw.SinglePerSec)
	require.Positive(t, rep.Raw.MemorySinglePerSec)
	d := rep.Raw.DiskSync
	require.NotNil(t, d, "the embedded server's disk is measured")
	require.Equal(t, 100, d.Writes)
	require.Equal(t, 512, d.Bytes)
	require.Positive(t, d.MedianMicros)
	require.GreaterOrEqual(t, d.P99Micros, d.MedianMicros)
	require.Positive(t, rep.Raw.Batch100Sec)
	require.Positive(t, rep.Raw.Batch1000Sec)

	h := rep.HappyPath
	require.NotNil(t, h)
	require.Equal(t, 100, h.Finished[aggregate.StatusSucceeded])
	require.Positive(t, h.JobsPerSec)
	require.GreaterOrEqual(t, h.Seconds, h.ProjectionSeconds)
	require.Positive(t, h.EventsPerJob)
	require.Positive(t, h.AppendsPerJob)
	require.LessOrEqual(t, h.AppendsPerJob, h.EventsPerJob)
	require.Positive(t, h.CPUSeconds)
	require.Positive(t, h.CPUMicrosPerJob)
	require.Positive(t, h.CoresBusy)
	require.NotEmpty(t, h.CPUByPart, "the phase's CPU split by part")
	for part := range h.CPUByPart {
		require.Contains(t, bench.CPUParts, part)
	}
	require.Positive(t, rep.Ratios.HappyPathToRawSingle)
	require.Nil(t, h.LatencyMillis, "the happy path is not paced")

	st := rep.Steady
	require.NotNil(t, st)
	require.Equal(t, 30, st.Finished[aggregate.StatusSucceeded])
	require.Equal(t, 200.0, st.PacePerSec)
	require.Positive(t, st.CPUMicrosPerJob)
	l := st.LatencyMillis
	require.NotNil(t, l, "a paced phase times its jobs")
	require.Positive(t, l.Median)
	require.GreaterOrEqual(t, l.P99, l.Median)
	require.GreaterOrEqual(t, l.Max, l.P99)
	require.Equal(t, 0.02, st.SearchSeconds)
	require.GreaterOrEqual(t, l.Median, 20.0, "a job waits for its search")

	p := rep.Replay
	require.NotNil(t, p)
	require.Nil(t, p.Seeded, "--replay-events was not given")
	require.Nil(t, p.CatchUp, "nothing seeded, nothing to catch up with")
	require.Positive(t, p.Events)
	require.True(t, p.Audit.OK, "audit violations: %+v", p.Audit.First)
	require.Zero(t, p.Audit.Violations)
	require.EqualValues(t, p.Events, p.Audit.Events)
	require.Less(t, p.Messages, p.Events, "an append of several events is one message")
	require.Equal(t, 130, p.Audit.Jobs)
	require.Positive(t, p.Audit.EventsPerSec)
	require.Equal(t, audit.GCPercent, p.Audit.GCPercent)
	require.EqualValues(t, p.Events, p.Rebuild.Events)
	require.Positive(t, p.Rebuild.EventsPerSec)
	require.Positive(t, p.Rebuild.FoldEventsPerSec)
	require.Positive(t, p.Rebuild.Values)
	require.Zero(t, p.Rebuild.Deleted, "the rebuild agrees with the engine's projections")
	require.Positive(t, rep.Ratios.AuditToRawSingle)
	require.Positive(t, rep.Ratios.RebuildToRawSingle)

	s := rep.Scale
	require.NotNil(t, s)
	require.Equal(t, 1000, s.Jobs)
	require.Equal(t, 1000, s.Seed.Jobs)
	require.GreaterOrEqual(t, s.Seed.Events, uint64(4*1000))
	require.EqualValues(t, s.Seed.Events, s.Events)
	require.Positive(t, s.Seed.EventsPerSec)
	require.Equal(t, 300, s.Small.Jobs)
	require.Equal(t, 1000, s.Large.Jobs)
	for _, l := range []bench.Load{s.Small, s.Large} {
		require.Equal(t, 500, l.Loads)
		require.Positive(t, l.MedianMicros)
		require.GreaterOrEqual(t, l.P99Micros, l.MedianMicros)
		require.GreaterOrEqual(t, l.EventsPerLoad, 4.0)
	}
	require.Positive(t, s.LoadMedianRatio)
	requireChild(t, s.Engine, bin, 1000, true, 100)
	require.NotNil(t, s.EngineSmall, "the engine on the small log, to compare with")
	requireChild(t, *s.EngineSmall, bin, 300, true, 100)
	require.Positive(t, s.FreshRatio)
	require.Positive(t, s.PeakRSSRatio)
	require.Positive(t, s.BenchPeakRSSMB)
	require.Positive(t, rep.Memory.PeakRSSMB)

	// The table shows the same figures.
	var table bytes.Buffer
	require.NoError(t, bench.Print(&table, rep))
	for _, want := range []string{"raw, one at a time", "raw, one at a time, memory", "raw, disk write and fsync", "end to end, happy path", "end to end, steady 200/s", "a job from its command to its last event", "appends", "µs a job", "cores busy", "replay, audit", "audit OK",
		"replay, projection rebuild", "scale, seeding", "scale, load one job at 300 jobs", "scale, load one job at 1000 jobs", "scale, engine process memory",
		"scale, engine on the small log", "caught up (projections and metrics)", "started again, caught up in", "from its metrics checkpoint at", "scale, bench process memory", "memory, bench process"} {
		require.Contains(t, table.String(), want)
	}
}

// TestBenchScaleWithoutProjections runs the scale phase's engines with
// --projections=false: they are caught up once their metrics are, and the
// fresh jobs are done once their last events are stored.
func TestBenchScaleWithoutProjections(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine end to end and builds the serpent binary")
	}
	bin, env := buildSerpent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := cli.Run(ctx, []string{"bench", "--phases", "scale", "--scale-jobs", "400", "--scale-small", "100", "--scale-loads", "20",
		"--scale-engine-jobs", "30", "--scale-projections=false", "-o", "json", "--progress=false"}, env, &stdout, &stderr)
	require.NoError(t, err, "stderr: %s", stderr.String())
	var rep bench.Report
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
	s := rep.Scale
	require.NotNil(t, s)
	requireChild(t, s.Engine, bin, 400, false, 30)
	require.NotNil(t, s.EngineSmall)
	requireChild(t, *s.EngineSmall, bin, 100, false, 30)
	require.Zero(t, s.Engine.FreshJobs.ProjectionPerJob, "an engine without projections writes none")

	var table bytes.Buffer
	require.NoError(t, bench.Print(&table, rep))
	require.Contains(t, table.String(), "caught up (metrics; no projections)")
}

// TestBenchInflight runs the inflight phase small: each engine's first
// sweep arms again exactly the timers seeded as lost, its second none,
// and the second resumes from the first one's checkpoint.
func TestBenchInflight(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine as a child process and builds the serpent binary")
	}
	bin, env := buildSerpent(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	err := cli.Run(ctx, []string{"bench", "--phases", "inflight", "--inflight-jobs", "3000", "--scale-small", "1000",
		"-o", "json", "--progress=false"}, env, &stdout, &stderr)
	require.NoError(t, err, "stderr: %s", stderr.String())
	var rep bench.Report
	dec := json.NewDecoder(bytes.NewReader(stdout.Bytes()))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep))
	require.Equal(t, []string{"inflight"}, rep.Phases)
	f := rep.Inflight
	require.NotNil(t, f)
	require.Equal(t, 3000, f.Jobs)
	require.Equal(t, 3, f.LostTimers)
	require.Equal(t, 3000, f.Seed.Jobs)
	require.GreaterOrEqual(t, f.Seed.Events, uint64(3000))
	requireInflight(t, f.Engine, bin, 3000, 3)
	require.NotNil(t, f.EngineSmall, "the engine on the small log, to compare with")
	requireInflight(t, *f.EngineSmall, bin, 1000, 1)
	require.Positive(t, f.PeakRSSRatio)

	var table bytes.Buffer
	require.NoError(t, bench.Print(&table, rep))
	for _, want := range []string{"inflight, seeding (setup)", "3 timers left out as lost", "inflight, engine process memory",
		"on 3000 jobs in flight", "swept 3000 jobs in", "re-arming 3 lost timers", "started again, from its metrics checkpoint at",
		"re-arming 0 lost timers", "inflight, engine on the small log"} {
		require.Contains(t, table.String(), want)
	}
}

// requireInflight checks the figures of an engine started twice on jobs
// jobs in flight, lost of whose timers were lost.
func requireInflight(t *testing.T, e bench.InflightEngine, bin string, jobs, lost int) {
	t.Helper()
	require.True(t, e.Measured, e.Why)
	require.Equal(t, bin, e.Binary)
	require.Equal(t, jobs, e.Jobs)
	require.Zero(t, e.First.ResumedFrom, "a fresh log has no checkpoint")
	require.Equal(t, lost, e.First.Rearmed)
	require.Positive(t, e.Restart.ResumedFrom, "from the checkpoint the first engine left: %s", e.Restart.Why)
	require.Zero(t, e.Restart.Rearmed, "the first sweep armed them")
	for _, s := range []bench.InflightStart{e.First, e.Restart} {
		require.Equal(t, jobs, s.SweptJobs)
		require.Positive(t, s.PeakRSSMB)
		require.GreaterOrEqual(t, s.PeakRSSMB, s.RSSMB)
	}
}

// buildSerpent builds the serpent binary for the scale phase to run as the
// engine, and returns it with an environment that names it.
func buildSerpent(t *testing.T) (string, func(string) string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "serpent")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/serpent-engine/serpent/cmd/serpent").CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return bin, func(k string) string {
		if k == "SERPENT_BENCH_ENGINE_BIN" {
			return bin
		}
		return os.Getenv(k)
	}
}

// requireChild checks the figures of the engine run as a child process on
// a log of jobs finished jobs.
func requireChild(t *testing.T, e bench.Child, bin string, jobs int, projections bool, fresh int) {
	t.Helper()
	require.True(t, e.Measured, e.Why)
	require.Equal(t, bin, e.Binary)
	require.Equal(t, jobs, e.Jobs)
	require.Equal(t, projections, e.Projections)
	require.Positive(t, e.PeakRSSMB)
	require.Positive(t, e.RSSAfterCatchUpMB)
	require.GreaterOrEqual(t, e.PeakRSSMB, e.RSSAfterCatchUpMB)
	require.Positive(t, e.CatchUpEventsPerSec)
	require.Greater(t, e.CatchUpEventsPerSec, e.CatchUpMsgsPerSec, "a message holds an append's events")
	require.NotNil(t, e.FreshJobs)
	require.Equal(t, fresh, e.FreshJobs.Finished[aggregate.StatusSucceeded])
	a := e.Restart
	require.NotNil(t, a, "started again")
	require.Empty(t, a.Why)
	require.Greater(t, a.ResumedFrom, uint64(4*jobs/2), "from the checkpoint the first engine left")
	require.Positive(t, a.PeakRSSMB)
}

func TestBenchOnAnExistingServerRefusesScale(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--nats-url", "nats://127.0.0.1:4222", "--phases", "scale"},
		{"bench", "--nats-url", "nats://127.0.0.1:4222", "--phases", "inflight"},
		{"bench", "--nats-url", "nats://127.0.0.1:4222", "--replay-events", "1000"},
	} {
		_, _, err := runCmd(t, args...)
		require.ErrorIs(t, err, bench.ErrUsage)
		require.Contains(t, err.Error(), "--nats-url")
	}
	_, _, err := runCmd(t, "bench", "--nats-url", "nats://127.0.0.1:4222", "--nats-user", "bench")
	require.ErrorIs(t, err, bench.ErrUsage)
	require.Contains(t, err.Error(), "no password")
}

func TestBenchRejectsUnknownPhases(t *testing.T) {
	_, _, err := runCmd(t, "bench", "--phases", "raw,fly")
	require.ErrorIs(t, err, bench.ErrUsage)
	require.Contains(t, err.Error(), `"fly"`)
}

// TestBenchRefusesBadFlags: settings that used to panic, run nothing, or
// quietly become something else are usage errors.
func TestBenchRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	typo := filepath.Join(dir, "typo.json")
	require.NoError(t, os.WriteFile(typo, []byte(`{"dropAfterSerch":0.1}`), 0o644))
	whole := filepath.Join(dir, "sandbox.json")
	require.NoError(t, os.WriteFile(whole, []byte(`{"seed":1,"faults":{"dropAfterSearch":0.1}}`), 0o644))
	over := filepath.Join(dir, "over.json")
	require.NoError(t, os.WriteFile(over, []byte(`{"dropAfterSearch":1.5}`), 0o644))
	for name, args := range map[string][]string{
		"a negative payload":   {"--payload", "-1"},
		"no payload":           {"--payload", "0"},
		"no workers":           {"--workers", "0"},
		"no phase":             {"--phases", ","},
		"a misspelt fault":     {"--phases", "faults", "--faults", typo},
		"a sandbox config":     {"--phases", "faults", "--faults", whole},
		"a probability over 1": {"--phases", "faults", "--faults", over},
		"no steady jobs":       {"--steady-jobs", "0"},
		"no small log":         {"--phases", "scale", "--scale-small", "0"},
		"no jobs in flight":    {"--phases", "inflight", "--inflight-jobs", "0"},
		"no steady rate":       {"--steady-rate", "0"},
		"a negative rate":      {"--steady-rate", "-5"},
		"a rate not a number":  {"--steady-rate", "NaN"},
		"an endless rate":      {"--steady-rate", "+Inf"},
		"a negative search":    {"--steady-search-time", "-1s"},
	} {
		_, _, err := runCmd(t, append([]string{"bench"}, args...)...)
		require.ErrorIs(t, err, bench.ErrUsage, name)
	}
}

func TestBenchHelpListsPhases(t *testing.T) {
	_, stderr, err := runCmd(t, "bench", "-h")
	require.NoError(t, err)
	for _, p := range bench.Phases {
		require.Regexp(t, `(?m)^  `+p+`\s`, stderr)
	}
	for _, f := range []string{"-replay-events", "-scale-jobs", "-scale-small", "-scale-projections", "-inflight-jobs", "-steady-jobs", "-steady-rate", "-steady-search-time", "-cpuprofile", "-memprofile", "-cpu-parts"} {
		require.Contains(t, stderr, f)
	}
}

// TestBenchCPUProfileLeavesTheSplitOut: with --cpuprofile the profile is
// the user's, written whole, and the phases carry no split; with
// --cpu-parts=false neither.
func TestBenchCPUProfileLeavesTheSplitOut(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine end to end")
	}
	prof := filepath.Join(t.TempDir(), "cpu.out")
	for _, extra := range [][]string{{"--cpuprofile", prof}, {"--cpu-parts=false"}} {
		args := append([]string{"bench", "--phases", "happy", "--jobs", "20", "-o", "json", "--progress=false"}, extra...)
		out, stderr, err := runCmd(t, args...)
		require.NoError(t, err, stderr)
		var rep bench.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
		require.NotNil(t, rep.HappyPath)
		require.Nil(t, rep.HappyPath.CPUByPart, "%v", extra)
	}
	st, err := os.Stat(prof)
	require.NoError(t, err)
	require.Positive(t, st.Size())
}

// runCmd runs serpent as main would and returns what it printed.
func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := cli.Run(context.Background(), args, func(string) string { return "" }, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}
