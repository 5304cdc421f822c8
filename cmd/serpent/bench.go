package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

func init() {
	register(command{name: "bench", summary: "measure throughput, replay speed and memory on an embedded server", run: runBench})
}

// benchFlags are the knobs of "serpent bench".
type benchFlags struct {
	jobs     int
	workers  int
	payload  int
	raw      int
	faults   string
	dir      string
	output   string
	phases   string
	progress bool
}

// benchReport is everything one bench run measured.
type benchReport struct {
	Machine   benchMachine `json:"machine"`
	Raw       benchRaw     `json:"raw"`
	HappyPath *benchE2E    `json:"happy_path,omitempty"`
	Faults    *benchE2E    `json:"faults,omitempty"`
	Memory    benchMemory  `json:"memory"`
	Ratios    benchRatios  `json:"ratios"`
}

type benchMachine struct {
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go"`
	Fsync     string `json:"fsync"`
}

type benchRatios struct {
	HappyPathToRawSingle float64 `json:"happy_path_to_raw_single"`
	FaultsToRawSingle    float64 `json:"faults_to_raw_single"`
}

func runBench(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	var f benchFlags
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.jobs, "jobs", 5000, "jobs in each end-to-end phase")
	fs.IntVar(&f.workers, "workers", 512, "jobs the engine works on at once (intake and due jobs each)")
	fs.IntVar(&f.payload, "payload", 512, "bytes of each message in the raw publish phase (about an event's size)")
	fs.IntVar(&f.raw, "raw", 3000, "messages in each raw publish phase")
	fs.StringVar(&f.faults, "faults", "default", "fault mix of the faults phase: default, none, or a JSON file of sandbox faults")
	fs.StringVar(&f.dir, "data", "", "folder for the server's data (default: a temporary folder, removed after)")
	fs.StringVar(&f.output, "o", "table", "output: table or json")
	fs.StringVar(&f.phases, "phases", "raw,happy,faults", "phases to run, comma-separated")
	fs.BoolVar(&f.progress, "progress", true, "show progress on stderr")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: serpent bench [flags]

Measures, in one run on an embedded JetStream server configured like
production (fsync on every write, one replica):

  raw       one-at-a-time durable publishes of --payload byte messages, and
            atomic batches of 100, on the same server: the ceiling
  happy     the engine end to end (schedule commands in, observations
            stored) against an in-process sandbox with no added latency
  faults    the same under a fault mix
  memory    peak RSS and heap of this process (engine and embedded server)

and prints them side by side with the ratios to the raw one-at-a-time rate.
Flags:

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: bench: %v", errUsage, err)
	}
	if f.output != "table" && f.output != "json" {
		return fmt.Errorf("%w: -o %q: use table or json", errUsage, f.output)
	}
	faults, err := benchFaults(f.faults)
	if err != nil {
		return err
	}
	dir := f.dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "serpent-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	if path := env("SERPENT_CPUPROFILE"); path != "" {
		pf, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	prog := benchProgress(stderr, f.progress)
	mem := startMemorySampler()
	defer mem.stop()

	// The sandbox the engine buys from, with no added latency.
	sb := sandbox.New(sandbox.Config{Seed: 1})
	sbURL, err := sb.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer sb.Close()

	eng, err := startBenchEngine(ctx, env, filepath.Join(dir, "data"), sbURL, f.workers)
	if err != nil {
		return err
	}
	defer eng.stop()
	nc, js, err := benchConnect(eng.natsURL)
	if err != nil {
		return err
	}
	defer nc.Close()

	rep := benchReport{Machine: machine()}
	phases := map[string]bool{}
	for _, p := range regexp.MustCompile(`[^,\s]+`).FindAllString(f.phases, -1) {
		phases[p] = true
	}
	if phases["raw"] {
		if rep.Raw, err = benchRawPublish(ctx, js, f.raw, f.payload, prog); err != nil {
			return err
		}
	}
	if phases["happy"] {
		sb.SetFaults(sandbox.Faults{})
		r, err := benchEndToEnd(ctx, js, "happy", f.jobs, prog)
		if err != nil {
			return err
		}
		rep.HappyPath = &r
	}
	if phases["faults"] {
		sb.SetFaults(faults)
		r, err := benchEndToEnd(ctx, js, "faults", f.jobs, prog)
		if err != nil {
			return err
		}
		rep.Faults = &r
	}
	rep.Memory = mem.peak()
	if rep.Raw.SinglePerSec > 0 {
		if rep.HappyPath != nil {
			rep.Ratios.HappyPathToRawSingle = round2(rep.HappyPath.JobsPerSec / rep.Raw.SinglePerSec)
		}
		if rep.Faults != nil {
			rep.Ratios.FaultsToRawSingle = round2(rep.Faults.JobsPerSec / rep.Raw.SinglePerSec)
		}
	}
	if f.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return printBench(stdout, rep)
}

// benchFaults reads the fault mix of the faults phase.
func benchFaults(spec string) (sandbox.Faults, error) {
	switch spec {
	case "none":
		return sandbox.Faults{}, nil
	case "default", "":
		return defaultFaultMix(), nil
	}
	data, err := os.ReadFile(spec)
	if err != nil {
		return sandbox.Faults{}, fmt.Errorf("%w: -faults: %v", errUsage, err)
	}
	var f sandbox.Faults
	if err := json.Unmarshal(data, &f); err != nil {
		return sandbox.Faults{}, fmt.Errorf("%w: -faults %s: %v", errUsage, spec, err)
	}
	return f, nil
}

// defaultFaultMix is the fault mix the bench and the docs call "default":
// about a quarter of first sends meet a fault of some kind.
func defaultFaultMix() sandbox.Faults {
	return sandbox.Faults{DropBeforeSearch: 0.03, DropAfterSearch: 0.05, GatewayPage502: 0.03, GatewayPage504: 0.02,
		Timeout408: 0.03, Failed424: 0.02, Unavailable503: 0.02, BillingUnavailable503: 0.03, EarlyExpiry: 0.03,
		ZeroResults: 0.03, RateLimited429: 0.01}
}

// benchEngine is "serpent run" running inside the bench process.
type benchEngine struct {
	natsURL string
	stop    func()
}

func startBenchEngine(ctx context.Context, env func(string) string, dataDir, sandboxURL string, workers int) (*benchEngine, error) {
	ctx, cancel := context.WithCancel(ctx)
	out := &syncWriter{}
	done := make(chan error, 1)
	args := []string{"run", "--data", dataDir, "--nats-listen", "127.0.0.1:0", "--http", "", "--sandbox-url", sandboxURL,
		"--workers", strconv.Itoa(workers), "--intake-concurrency", strconv.Itoa(workers), "--log-level", "error",
		"--sweep-every", "0", "--base-delay", "20ms", "--max-delay", "200ms", "--lease", "20s", "--client-timeout", "10s"}
	go func() { done <- run(ctx, args, func(k string) string { return "" }, out, io.Discard) }()
	re := regexp.MustCompile(`JetStream at (nats://\S+)`)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil && regexp.MustCompile(`ready with`).MatchString(out.String()) {
			return &benchEngine{natsURL: m[1], stop: func() { cancel(); <-done }}, nil
		}
		select {
		case err := <-done:
			cancel()
			return nil, fmt.Errorf("bench: the engine stopped at start: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	<-done
	return nil, errors.New("bench: the engine did not start within 30 s")
}
