package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// Program is serpent's whole program (cli.Run). The bench runs "serpent
// run" with it in its own process, and its measured parts as child
// processes of the serpent binary.
type Program func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error

// ErrUsage marks a mistake in how the bench was called.
var ErrUsage = errors.New("usage")

// Summary is the bench's line in serpent's list of commands.
const Summary = "measure throughput, replay speed and memory on an embedded server"

// benchPhases are the phases bench knows, in the order they run.
var benchPhases = []string{"raw", "happy", "steady", "faults", "replay", "scale", "inflight", "retention"}

// benchFlags are the knobs of "serpent bench".
type benchFlags struct {
	jobs         int
	steadyJobs   int
	steadyRate   float64
	steadySearch time.Duration
	workers      int
	payload      int
	raw          int
	faults       string
	dir          string
	output       string
	phases       string
	progress     bool
	replayEvents int
	scaleJobs    int
	scaleSmall   int
	scaleLoads   int
	scaleFresh   int
	scaleEngine  bool
	scaleProj    bool
	inflightJobs int
	retHorizon   time.Duration
	retHorizons  int
	retRate      float64
	cpuProfile   string
	memProfile   string
	cpuParts     bool
	// nats, when it says where (a URL or a nats CLI context), is an
	// existing NATS the engine and the phases use instead of an embedded
	// server.
	nats     snats.ConnConfig
	external bool
}

// Report is everything one bench run measured: what -o json prints.
type Report struct {
	Machine   benchMachine    `json:"machine"`
	Phases    []string        `json:"phases"`
	Raw       benchRaw        `json:"raw"`
	HappyPath *benchE2E       `json:"happy_path,omitempty"`
	Steady    *benchE2E       `json:"steady,omitempty"`
	Faults    *benchE2E       `json:"faults,omitempty"`
	Replay    *benchReplay    `json:"replay,omitempty"`
	Scale     *benchScale     `json:"scale,omitempty"`
	Inflight  *benchInflight  `json:"inflight,omitempty"`
	Retention *benchRetention `json:"retention,omitempty"`
	// Memory is this bench process: the bench, the in-process engine and
	// the embedded NATS servers together.
	Memory benchMemory `json:"memory"`
	Ratios benchRatios `json:"ratios"`
}

type benchMachine struct {
	// Server is "embedded", or "existing" for a server given with
	// --nats-url or --nats-context.
	Server    string `json:"server"`
	Replicas  int    `json:"replicas"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go"`
	Fsync     string `json:"fsync"`
}

// benchRatios are the rates of the phases over the raw one-at-a-time
// publish rate (jobs/s or events/s over messages/s).
type benchRatios struct {
	HappyPathToRawSingle float64 `json:"happy_path_to_raw_single,omitempty"`
	FaultsToRawSingle    float64 `json:"faults_to_raw_single,omitempty"`
	AuditToRawSingle     float64 `json:"audit_to_raw_single,omitempty"`
	RebuildToRawSingle   float64 `json:"rebuild_to_raw_single,omitempty"`
}

// benchRun is one run of serpent bench: the sandbox, the engine running
// in this process and a connection to its embedded server.
type benchRun struct {
	f       benchFlags
	env     func(string) string
	serpent Program
	dir     string
	prog    progressFunc
	stderr  io.Writer
	// cpuParts: the end-to-end phases split their CPU time by part.
	cpuParts bool
	sb       *sandbox.Server
	sbURL    string
	eng      *benchEngine
	nc       *natsgo.Conn
	js       jetstream.JetStream
}

// parseBenchFlags parses and checks the arguments of "serpent bench" and
// returns the flags and the phases asked for; flag.ErrHelp after -h.
func parseBenchFlags(args []string, env func(string) string, stderr io.Writer) (benchFlags, map[string]bool, error) {
	var f benchFlags
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&f.jobs, "jobs", 5000, "jobs in the happy and faults phases")
	fs.IntVar(&f.steadyJobs, "steady-jobs", 1000, "jobs in the steady phase")
	fs.Float64Var(&f.steadyRate, "steady-rate", 100, "steady phase: schedule commands a second, published one at a time")
	fs.DurationVar(&f.steadySearch, "steady-search-time", time.Second, "steady phase: how long the sandbox takes to answer a search (the API allows up to 90 s)")
	fs.IntVar(&f.workers, "workers", 512, "jobs the engine works on at once (intake and due jobs each)")
	fs.IntVar(&f.payload, "payload", 512, "bytes of each message in the raw publish phase (events average some 1,200 bytes with their envelope; the fsync, not the size, sets the one-at-a-time rate: 512 and 1,200 measure alike here)")
	fs.IntVar(&f.raw, "raw", 3000, "messages in each raw publish phase (ten times as many in batches of 1,000)")
	fs.StringVar(&f.faults, "faults", "default", "fault mix of the faults phase: default, none, or a JSON file of sandbox faults")
	fs.StringVar(&f.dir, "data", "", "folder for the servers' data (default: a temporary folder, removed after)")
	fs.StringVar(&f.output, "o", "table", "output: table or json")
	fs.StringVar(&f.phases, "phases", "raw,happy,steady,faults,replay", "phases to run, comma-separated: "+strings.Join(benchPhases, ", "))
	fs.BoolVar(&f.progress, "progress", true, "show progress on stderr")
	fs.IntVar(&f.replayEvents, "replay-events", 0, "replay phase: first seed finished jobs until the log holds at least this many events (0: replay the log as the earlier phases left it)")
	fs.IntVar(&f.scaleJobs, "scale-jobs", 1_000_000, "scale phase: finished jobs in its fresh log")
	fs.IntVar(&f.scaleSmall, "scale-small", 10_000, "scale phase: finished jobs in the smaller log its figures are compared with")
	fs.IntVar(&f.scaleLoads, "scale-loads", 2000, "scale phase: random job loads timed at each size")
	fs.IntVar(&f.scaleFresh, "scale-engine-jobs", 300, "scale phase: fresh jobs run through the engine process")
	fs.BoolVar(&f.scaleEngine, "scale-engine", true, "scale phase: run the engine as a child process on the log (its projections catch up from scratch), and on a log of --scale-small jobs to compare with")
	fs.BoolVar(&f.scaleProj, "scale-projections", true, "scale phase: the engine process keeps its projections (false: it runs with --projections=false, which spares the catch-up of a long log: 23 million events at 5,000,000 jobs)")
	fs.IntVar(&f.inflightJobs, "inflight-jobs", 1_000_000, "inflight phase: jobs in flight in its fresh log")
	fs.DurationVar(&f.retHorizon, "retention-horizon", 30*time.Second, "retention phase: the engine's --retention (at least 5s: its jobs' age budget and clock skew margin are a second)")
	fs.IntVar(&f.retHorizons, "retention-horizons", 4, "retention phase: horizons of jobs to run, at least 1")
	fs.Float64Var(&f.retRate, "retention-rate", 50, "retention phase: schedule commands a second")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the bench process to this file (env SERPENT_CPUPROFILE too)")
	fs.BoolVar(&f.cpuParts, "cpu-parts", true, "end-to-end phases: split their CPU time into the engine's, the embedded server's, the sandbox's, the bench's and the rest (the Go scheduler and garbage collector, timers' callbacks), from a CPU profile of each phase; not with --cpuprofile, which takes the profile")
	fs.StringVar(&f.memProfile, "memprofile", "", "write a heap profile of the bench process to this file at the end, as taken at the peak of its heap")
	f.nats.RegisterFlagsOrEmbed(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: serpent bench [flags]

Measures, in one run on embedded JetStream servers configured like
production (fsync on every write, one replica), the phases given with
--phases, in this order (the default is raw,happy,steady,faults,replay):

  raw       one-at-a-time durable publishes of --payload byte messages, and
            atomic batches of 100 and of 1,000 (over ten times --raw
            messages), on the same server: the ceilings. To explain the
            one-at-a-time rate, also the same publishes to a stream in
            memory (the round trip without the disk) and, on the embedded
            server, a write and an fsync of --payload bytes in its data
            folder without the server (the disk alone)
  happy     the engine end to end (schedule commands in, observations
            stored, projections updated) against an in-process sandbox with
            no added latency, in jobs per second; with the durable writes
            per job: events, appends (the writes the engine waited for, one
            per job each) and timer/work messages; and the CPU time this
            process used per job, with how many cores it kept busy (with
            the embedded server, the server's share included), and that
            time split by part as a CPU profile of the phase samples it:
            the engine (with its NATS and HTTP clients), the embedded
            server, the sandbox, the bench, and other (the Go scheduler
            and garbage collector, timers' callbacks such as the server
            firing message schedules); --cpu-parts=false leaves the
            split out, and --cpuprofile, which takes the profile, does too
  steady    the same at a steady load, the one most deployments see:
            --steady-jobs commands published one at a time, --steady-rate
            a second, the sandbox taking --steady-search-time to answer
            each search; with how long a job took from its command to its
            last event in the log (median, p99, max). Group commits are
            small then, so its CPU a job is what a lightly loaded engine
            pays
  faults    the same under a fault mix (commands as in happy)
  replay    the whole event log as the earlier phases left it (first seeded
            with finished jobs until it holds --replay-events events; an
            empty log is not measured), in events per second: the engine's
            projections catching up with the seeded events when it starts
            again on the log (serpent run on an existing log), the audit
            (serpent audit's replay, with its GOGC; it must find no
            violation) and a projection rebuild (serpent projections
            rebuild, beside the running engine)
  scale     not run by default. On a fresh log of its own: seeds
            --scale-jobs finished jobs (with fsync relaxed while seeding,
            which is setup), times the event store's Load of one random job
            at --scale-small jobs (10,000) and at --scale-jobs jobs (median
            and p99, target: within 1.5x; and of recent jobs only), then
            starts the engine (serpent run) as a child process on that log,
            lets it catch up (projections from scratch, unless
            --scale-projections=false; metrics), runs --scale-engine-jobs
            fresh jobs through it and reads its peak RSS (target: under
            300 MB); then the same on a fresh log of --scale-small jobs,
            to compare with. The engine binary is
            $SERPENT_BENCH_ENGINE_BIN, else this executable.
  inflight  not run by default. On a fresh log of its own: seeds
            --inflight-jobs jobs in flight (scheduled for slots two days
            ahead and more, each with its timer in SERP_WORK but one in a
            thousand, whose timer is lost), then starts the engine
            (serpent run --projections=false) as a child process on it:
            how long its metrics take to count the log, how long its
            sweep of the jobs in flight takes (it must arm again the lost
            timers, and no other), and its memory; then the same for the
            engine started again, which resumes from its metrics
            checkpoint; then all of it on a fresh log of --scale-small
            jobs in flight, to compare with. The engine binary is as in
            scale.
  retention not run by default. On a fresh server of its own, the engine
            (a child process, as in scale, else in this process) runs with
            --retention --retention-horizon (a job's age budget and the
            clock skew margin a second each) while --retention-rate
            commands a second come in, for --retention-horizons horizons.
            After each horizon, and once every job is finished: the live
            log's subjects, messages and bytes (they level off), the
            archive's messages, bytes, bytes on disk and compression (it
            grows), this process's heap (the server's), the engine's RSS,
            a recent job's load time, and serpent audit over archive and
            live log with the ledger join against the sandbox (events a
            second; no job lost or bought twice).

and, after them all:

  memory    peak RSS and heap of this bench process over the whole run
            (the replay phase's audit, at GOGC=400, included): the bench, the engine
            it runs in-process and the embedded NATS servers together

It prints a table with the ratios to the raw one-at-a-time rate, or every
figure with -o json.

With --nats-url or --nats-context (and the other --nats-* flags or
NATS_* variables for its authentication) the engine and the phases use
that existing server instead: the engine in this process joins it like
"serpent run --nats-url" does, the raw phase makes and then deletes the
streams SERPENT_BENCH and SERPENT_BENCH_MEMORY on it, and the jobs the
bench runs stay in its SERP_EVENTS. Point it at a server or account of
its own, never at one that holds real jobs. The scale and inflight
phases and --replay-events, which restart servers of their own, need the
embedded one.

Flags:

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, nil, err
		}
		return f, nil, fmt.Errorf("%w: bench: %v", ErrUsage, err)
	}
	if fs.NArg() > 0 {
		return f, nil, fmt.Errorf("%w: bench takes no arguments, got %q", ErrUsage, fs.Args())
	}
	if f.output != "table" && f.output != "json" {
		return f, nil, fmt.Errorf("%w: -o %q: use table or json", ErrUsage, f.output)
	}
	phases := map[string]bool{}
	for _, p := range regexp.MustCompile(`[^,\s]+`).FindAllString(f.phases, -1) {
		if !slices.Contains(benchPhases, p) {
			return f, nil, fmt.Errorf("%w: --phases: unknown phase %q (phases: %s)", ErrUsage, p, strings.Join(benchPhases, ", "))
		}
		phases[p] = true
	}
	if len(phases) == 0 {
		return f, nil, fmt.Errorf("%w: --phases names no phase (phases: %s)", ErrUsage, strings.Join(benchPhases, ", "))
	}
	if f.scaleJobs < 1 || f.scaleSmall < 1 || f.inflightJobs < 1 || f.scaleLoads < 1 || f.jobs < 1 || f.steadyJobs < 1 || f.raw < 1 || f.payload < 1 || f.workers < 1 {
		return f, nil, fmt.Errorf("%w: --jobs, --steady-jobs, --workers, --raw, --payload, --scale-jobs, --scale-small, --scale-loads and --inflight-jobs must be at least 1", ErrUsage)
	}
	if !(f.steadyRate > 0) || math.IsInf(f.steadyRate, 1) {
		return f, nil, fmt.Errorf("%w: --steady-rate %v: commands a second, a number above 0", ErrUsage, f.steadyRate)
	}
	if f.steadySearch < 0 {
		return f, nil, fmt.Errorf("%w: --steady-search-time %v cannot be negative", ErrUsage, f.steadySearch)
	}
	if f.retHorizons < 1 || !(f.retRate > 0) || math.IsInf(f.retRate, 1) || f.retHorizon < 5*time.Second {
		return f, nil, fmt.Errorf("%w: --retention-horizons must be at least 1, --retention-rate above 0 and --retention-horizon at least 5s", ErrUsage)
	}
	if f.scaleFresh < 0 || f.replayEvents < 0 {
		return f, nil, fmt.Errorf("%w: --scale-engine-jobs and --replay-events cannot be negative", ErrUsage)
	}
	if f.external = f.nats.Given(env); f.external {
		if phases["scale"] || phases["inflight"] || phases["retention"] || f.replayEvents > 0 {
			return f, nil, fmt.Errorf("%w: the scale, inflight and retention phases and --replay-events run servers of their own: leave out --nats-url and --nats-context", ErrUsage)
		}
		if err := f.nats.Validate(); err != nil {
			return f, nil, fmt.Errorf("%w: %v", ErrUsage, err)
		}
	}
	return f, phases, nil
}

// Run is serpent bench: args are its flags; serpent is the program whose
// engine it measures.
func Run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer, serpent Program) (err error) {
	// The bench's goroutines, and those it starts, work for the bench
	// unless started under another part (the sandbox, the engine).
	withPart(ctx, partBench, func(ctx context.Context) { err = runParts(ctx, args, env, stdout, stderr, serpent) })
	return err
}

// CheckFlags reports what Run would refuse in args, without running.
func CheckFlags(args []string) error {
	_, _, err := parseBenchFlags(args, func(string) string { return "" }, io.Discard)
	return err
}

func runParts(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer, serpent Program) error {
	f, phases, err := parseBenchFlags(args, env, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
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
	cpuProfile := f.cpuProfile
	if cpuProfile == "" {
		cpuProfile = env("SERPENT_CPUPROFILE")
	}
	if cpuProfile != "" {
		pf, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			pf.Close()
			return err
		}
		defer func() { pprof.StopCPUProfile(); pf.Close() }()
	}
	b := &benchRun{f: f, env: env, serpent: serpent, dir: dir, prog: benchProgress(stderr, f.progress), stderr: stderr,
		cpuParts: f.cpuParts && cpuProfile == ""}
	mem := startMemorySampler(f.memProfile != "")
	defer mem.stop()

	// The sandbox the engines buy from, with no added latency.
	b.sb = sandbox.New(sandbox.Config{Seed: 1})
	withPart(ctx, partSandbox, func(context.Context) { b.sbURL, err = b.sb.Start("127.0.0.1:0") })
	if err != nil {
		return err
	}
	defer b.sb.Close()
	if phases["raw"] || phases["happy"] || phases["steady"] || phases["faults"] || phases["replay"] {
		if err := b.startEngine(ctx); err != nil {
			return err
		}
		defer b.stopEngine()
	}

	rep := Report{Machine: machine(f.external)}
	if b.js != nil {
		if s, err := b.js.Stream(ctx, snats.EventStream); err == nil {
			rep.Machine.Replicas = s.CachedInfo().Config.Replicas
		}
	}
	for _, p := range benchPhases {
		if phases[p] {
			rep.Phases = append(rep.Phases, p)
		}
	}
	if phases["raw"] {
		if rep.Raw, err = benchRawPublish(ctx, b.js, f.raw, f.payload, b.prog); err != nil {
			return err
		}
		if !f.external {
			d, err := benchDiskSyncProbe(filepath.Join(b.dir, "data"), min(f.raw, 1000), f.payload)
			if err != nil {
				return err
			}
			rep.Raw.DiskSync = &d
		}
	}
	if phases["happy"] {
		b.sb.SetFaults(sandbox.Faults{})
		r, err := benchEndToEnd(ctx, b.js, "happy", f.jobs, e2eOptions{CPUParts: b.cpuParts}, b.prog)
		if err != nil {
			return err
		}
		rep.HappyPath = &r
	}
	if phases["steady"] {
		b.sb.SetFaults(sandbox.Faults{})
		b.sb.SetSearchTime(f.steadySearch)
		r, err := benchEndToEnd(ctx, b.js, "steady", f.steadyJobs, e2eOptions{Pace: f.steadyRate, CPUParts: b.cpuParts}, b.prog)
		b.sb.SetSearchTime(0)
		if err != nil {
			return err
		}
		r.SearchSeconds = f.steadySearch.Seconds()
		rep.Steady = &r
	}
	if phases["faults"] {
		b.sb.SetFaults(faults)
		r, err := benchEndToEnd(ctx, b.js, "faults", f.jobs, e2eOptions{CPUParts: b.cpuParts}, b.prog)
		if err != nil {
			return err
		}
		rep.Faults = &r
	}
	b.sb.SetFaults(sandbox.Faults{})
	if phases["replay"] {
		r, err := b.replay(ctx)
		if err != nil {
			return err
		}
		rep.Replay = &r
	}
	if phases["scale"] {
		r, err := b.scale(ctx)
		if err != nil {
			return err
		}
		rep.Scale = &r
	}
	if phases["inflight"] {
		r, err := b.inflight(ctx)
		if err != nil {
			return err
		}
		rep.Inflight = &r
	}
	if phases["retention"] {
		r, err := b.retention(ctx)
		if err != nil {
			return err
		}
		rep.Retention = &r
	}
	rep.Memory = mem.peak()
	if single := rep.Raw.SinglePerSec; single > 0 {
		if rep.HappyPath != nil {
			rep.Ratios.HappyPathToRawSingle = round2(rep.HappyPath.JobsPerSec / single)
		}
		if rep.Faults != nil {
			rep.Ratios.FaultsToRawSingle = round2(rep.Faults.JobsPerSec / single)
		}
		if rep.Replay != nil {
			rep.Ratios.AuditToRawSingle = round2(rep.Replay.Audit.EventsPerSec / single)
			rep.Ratios.RebuildToRawSingle = round2(rep.Replay.Rebuild.EventsPerSec / single)
		}
	}
	if f.memProfile != "" {
		if err := mem.writeProfile(f.memProfile); err != nil {
			return err
		}
	}
	if f.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return printBench(stdout, rep)
}

// startEngine starts the in-process engine, with its embedded server on
// the run's data folder or on the existing server the flags name, and
// connects to that server.
func (b *benchRun) startEngine(ctx context.Context) error {
	var (
		eng *benchEngine
		err error
		nc  *natsgo.Conn
		js  jetstream.JetStream
	)
	if b.f.external {
		eng, err = startBenchEngine(ctx, b.serpent, []string{}, b.engineEnv(), b.sbURL, b.f.workers)
		if err == nil {
			if nc, js, err = b.f.nats.Dial(b.env, nil, "serpent bench"); errors.Is(err, snats.ErrConnConfig) {
				err = fmt.Errorf("%w: %w", ErrUsage, err)
			}
		}
	} else {
		eng, err = startBenchEngine(ctx, b.serpent, []string{"--data", filepath.Join(b.dir, "data"), "--nats-listen", "127.0.0.1:0"}, nil, b.sbURL, b.f.workers)
		if err == nil {
			nc, js, err = benchConnect(eng.natsURL)
		}
	}
	if err != nil && eng == nil {
		return err
	}
	if err != nil {
		eng.stop()
		return err
	}
	b.eng, b.nc, b.js = eng, nc, js
	return nil
}

// engineEnv is the environment of the in-process engine on an existing
// server: the bench's connection settings (flags and NATS_* variables) as
// NATS_* variables, and where the nats CLI contexts are; nothing else, so
// the engine buys from the bench's sandbox whatever else is set.
func (b *benchRun) engineEnv() map[string]string {
	c := b.f.nats
	env := map[string]string{
		"NATS_URL": strings.Join(c.URLs, ","), "NATS_CREDS": c.CredsFile, "NATS_NKEY": c.NKeySeedFile,
		"NATS_USER": c.User, "NATS_PASSWORD": c.Password, "NATS_TOKEN": c.Token,
		"NATS_CA": c.TLSCA, "NATS_CERT": c.TLSCert, "NATS_KEY": c.TLSKey,
		"NATS_CONTEXT": c.Context, "NATS_INBOX_PREFIX": c.InboxPrefix,
		"HOME": b.env("HOME"), "XDG_CONFIG_HOME": b.env("XDG_CONFIG_HOME"),
	}
	return env
}

// stopEngine stops the in-process engine and its server; it is safe to
// call twice.
func (b *benchRun) stopEngine() {
	if b.nc != nil {
		b.nc.Close()
		b.nc, b.js = nil, nil
	}
	if b.eng != nil {
		b.eng.stop()
		b.eng = nil
	}
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
		return sandbox.Faults{}, fmt.Errorf("%w: -faults: %v", ErrUsage, err)
	}
	// Strictly: a misspelt fault, or a whole sandbox config file, would
	// otherwise be no fault at all.
	var f sandbox.Faults
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return sandbox.Faults{}, fmt.Errorf("%w: -faults %s: a JSON object of fault probabilities (%s): %v", ErrUsage, spec, faultNames(), err)
	}
	if err := (sandbox.Config{Faults: f}).Validate(); err != nil {
		return sandbox.Faults{}, fmt.Errorf("%w: -faults %s: %v", ErrUsage, spec, err)
	}
	return f, nil
}

// faultNames lists the fields of a --faults file (sandbox.Faults).
func faultNames() string {
	var names []string
	t := reflect.TypeFor[sandbox.Faults]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return strings.Join(names, ", ")
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

// startBenchEngine runs "serpent run" in this process with the given
// server arguments (an embedded server's, or none for an existing server
// that env names) and waits until it is ready.
func startBenchEngine(ctx context.Context, serpent Program, serverArgs []string, env map[string]string, sandboxURL string, workers int) (*benchEngine, error) {
	ctx, cancel := context.WithCancel(ctx)
	out := &syncWriter{}
	done := make(chan error, 1)
	args := append(append([]string{"run"}, serverArgs...), "--http", "", "--sandbox-url", sandboxURL,
		"--workers", strconv.Itoa(workers), "--intake-concurrency", strconv.Itoa(workers), "--log-level", "error",
		"--sweep-every", "0", "--base-delay", "20ms", "--max-delay", "200ms", "--lease", "20s", "--client-timeout", "10s")
	go withPart(ctx, partEngine, func(ctx context.Context) {
		done <- serpent(ctx, args, func(k string) string { return env[k] }, out, io.Discard)
	})
	stopped := false
	err := pollUntil(ctx, 30*time.Second, 20*time.Millisecond, func() (bool, string, error) {
		if strings.Contains(out.String(), "ready with") {
			return true, "", nil
		}
		select {
		case err := <-done:
			stopped = true
			return false, "", fmt.Errorf("stopped at start: %w", err)
		default:
		}
		return false, "it has not said it is ready", nil
	})
	if err != nil {
		cancel()
		if !stopped {
			<-done
		}
		return nil, fmt.Errorf("bench: the engine: %w", err)
	}
	eng := &benchEngine{stop: func() { cancel(); <-done }}
	if m := regexp.MustCompile(`JetStream at (nats://\S+)`).FindStringSubmatch(out.String()); m != nil {
		eng.natsURL = m[1]
	}
	return eng, nil
}

// pollUntil calls check every interval until it is done or fails, ctx
// ends, or bound passes; then the error says what check last said it
// was waiting for.
func pollUntil(ctx context.Context, bound, every time.Duration, check func() (done bool, waiting string, err error)) error {
	deadline := time.Now().Add(bound)
	for {
		done, waiting, err := check()
		if done || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %s", bound, waiting)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
	}
}
