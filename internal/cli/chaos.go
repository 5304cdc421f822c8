package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/serpent-engine/serpent/chaos"
)

func init() {
	register(command{name: "chaos", summary: "kill, pause and restart real serpent processes under a fault mix, then check every promise", run: runChaos})
}

// runChaos is "serpent chaos".
func runChaos(ctx context.Context, args []string, _ func(string) string, stdout, stderr io.Writer) error {
	fs, cfg, output, quiet := chaosFlags(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: chaos: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: chaos takes no arguments, got %q", errUsage, fs.Args())
	}
	if *output != "text" && *output != "json" {
		return fmt.Errorf("%w: chaos: -o %q: use text or json", errUsage, *output)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	progress := stderr
	if *quiet {
		progress = io.Discard
	}
	rep, err := chaos.Run(ctx, *cfg, chaos.DefaultChecks(), progress)
	if err != nil {
		return err
	}
	return printChaosReport(rep, *output, stdout)
}

// printChaosReport prints the report and exits 1 if a promise broke.
func printChaosReport(rep *chaos.Report, output string, stdout io.Writer) error {
	var err error
	if output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(rep)
	} else {
		err = rep.WriteTable(stdout)
	}
	if err != nil {
		return err
	}
	if !rep.OK() {
		return &exitError{code: 1, err: fmt.Errorf("chaos: %d promises broken (see the report)", len(rep.Violations))}
	}
	return nil
}

// chaosFlags declares the flags of "serpent chaos" over the CI-sized
// defaults.
func chaosFlags(stderr io.Writer) (*flag.FlagSet, *chaos.Config, *string, *bool) {
	cfg := chaos.DefaultConfig()
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&cfg.Jobs, "jobs", cfg.Jobs, "distinct observations to order")
	fs.Float64Var(&cfg.Duplicates, "duplicates", cfg.Duplicates, "share of jobs whose command is published twice")
	fs.IntVar(&cfg.Malformed, "malformed", cfg.Malformed, "malformed commands published alongside")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "serpent run processes")
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, "jobs each worker handles at once (serpent run --workers)")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the sandbox's faults and of the chaos")
	fs.DurationVar(&cfg.Spread, "spread", cfg.Spread, "slots fall within this span from the start")
	fs.DurationVar(&cfg.PublishFor, "publish-for", cfg.PublishFor, "publishing the commands takes this long")
	fs.DurationVar(&cfg.ChaosFor, "chaos-for", cfg.ChaosFor, "longest phase with faults (it ends earlier once every job is finished)")
	fs.DurationVar(&cfg.Settle, "settle", cfg.Settle, "after the faults stop, every job must be finished within this")
	fs.DurationVar(&cfg.KillEvery, "kill-every", cfg.KillEvery, "mean time between SIGKILLs of a worker (0: none)")
	fs.DurationVar(&cfg.PauseEvery, "pause-every", cfg.PauseEvery, "mean time between SIGSTOPs of a worker (0: none)")
	fs.DurationVar(&cfg.PauseMin, "pause-min", cfg.PauseMin, "shortest pause (make it longer than --lease)")
	fs.DurationVar(&cfg.PauseMax, "pause-max", cfg.PauseMax, "longest pause")
	fs.DurationVar(&cfg.NATSRestartEvery, "nats-restart-every", cfg.NATSRestartEvery, "mean time between restarts of the NATS server (0: none)")
	fs.DurationVar(&cfg.SearchTime, "search-time", cfg.SearchTime, "how long a search runs in the sandbox")
	fs.DurationVar(&cfg.SlowSearchTime, "slow-search-time", cfg.SlowSearchTime, "how long a slow search runs")
	fs.DurationVar(&cfg.ReplayWindow, "replay-window", cfg.ReplayWindow, "the sandbox's and the engine's replay window")
	fs.DurationVar(&cfg.SafetyMargin, "safety-margin", cfg.SafetyMargin, "time kept free at the end of a key's window")
	fs.DurationVar(&cfg.ClientTimeout, "client-timeout", cfg.ClientTimeout, "how long a worker waits for a search")
	fs.DurationVar(&cfg.Lease, "lease", cfg.Lease, "how long a send keeps other workers off a job")
	fs.DurationVar(&cfg.AckWait, "ack-wait", cfg.AckWait, "ack wait of the work and intake consumers")
	fs.DurationVar(&cfg.BaseDelay, "base-delay", cfg.BaseDelay, "first backoff ceiling")
	fs.DurationVar(&cfg.MaxDelay, "max-delay", cfg.MaxDelay, "largest backoff")
	fs.DurationVar(&cfg.Retention, "retention", 0, "the workers' retention horizon, to have jobs leave the live log during the run; the checks read SERP_ARCHIVE (0: serpent run's default, 30 days)")
	fs.DurationVar(&cfg.MaxAge, "max-age", 15*time.Second, "with --retention: the workers' --max-age")
	fs.DurationVar(&cfg.SkewMargin, "skew-margin", 5*time.Second, "with --retention: the workers' --skew-margin")
	for _, p := range cfg.Faults.Flags() {
		fs.Float64Var(p.P, p.Name, *p.P, "sandbox fault probability: "+p.Help)
	}
	fs.BoolVar(&cfg.Naive, "naive", cfg.Naive, "also run the naive worker (a fresh key per delivery) under the same faults, for comparison")
	fs.IntVar(&cfg.NaiveJobs, "naive-jobs", cfg.NaiveJobs, "jobs of the naive comparison")
	fs.Float64Var(&cfg.NaiveCrash, "naive-crash", cfg.NaiveCrash, "share of the naive worker's deliveries that die before their acknowledgement")
	fs.StringVar(&cfg.Binary, "binary", "", "serpent binary to start (default: this one)")
	fs.StringVar(&cfg.Dir, "dir", "", "folder for the run's data and process logs (default: a temporary one, removed after)")
	fs.BoolVar(&cfg.Keep, "keep", false, "keep the temporary folder")
	output := fs.String("o", "text", "report format: text (a table) or json")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: serpent chaos [flags]

Starts a NATS server (serpent nats-server, fsync on every write), a sandbox
with a seeded fault mix and --workers serpent run processes, all as real
processes; publishes --jobs observations (some twice, some malformed); while
they run, kills workers with SIGKILL, freezes them with SIGSTOP past their
lease and restarts the NATS server; then waits for every job to finish and
checks, from the sandbox's billing ledger and serpent's own streams: every
job finished, none charged twice, every charge accounted for, no key sent
past its deadline or with another body, every command a job or a recorded
rejection, serpent audit clean and the projections equal to a fold of the
log (when this build has them). Prints a table of figures (or -o json) and
exits 1 if any promise broke. Flags:

`)
		fs.PrintDefaults()
	}
	return fs, &cfg, output, quiet
}
