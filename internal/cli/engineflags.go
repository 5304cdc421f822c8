package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper"
)

// engineFlags is everything "serpent run" can be told.
type engineFlags struct {
	nats          natsFlags
	dataDir       string
	natsListen    string
	replicas      int
	updateStreams bool
	// connectTimeout ends the start-up tries; 0 keeps trying.
	connectTimeout time.Duration
	// natsLog shows the embedded server's notices, its banner among them.
	natsLog bool

	apiURL        string
	tokenFile     string
	clientTimeout time.Duration
	sandboxConfig string
	sandboxURL    string
	accountsFile  string

	workers     int
	groupCommit bool
	intakeConc  int
	httpAddr    string
	grace       time.Duration
	ackWait     time.Duration
	sweepEvery  time.Duration
	rulesFile   string
	policy      events.RetryPolicy
	retention   time.Duration
	skewMargin  time.Duration
	firstSlot   time.Time
	log         logFlags
	name        string
	ops         opsFlags

	// sandboxAt is the sandbox's address when the engine talks to one.
	sandboxAt string
	// env and logOut are the process's environment and log stream.
	env    func(string) string
	logOut io.Writer
}

// DefaultRetention is how long a job stays in the live log by default.
const DefaultRetention = 30 * 24 * time.Hour

// DefaultAPIURL is the real Serper.live API.
const DefaultAPIURL = "https://api.serper.live"

func newEngineFlags(stderr io.Writer) (*flag.FlagSet, *engineFlags) {
	f := &engineFlags{policy: aggregate.DefaultPolicy(), logOut: stderr}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.nats.registerOrEmbed(fs)
	fs.StringVar(&f.dataDir, "data", "serpent-data", "folder of the embedded NATS server's data (used when no NATS URL is given)")
	fs.StringVar(&f.natsListen, "nats-listen", "127.0.0.1:4222", "address the embedded NATS server listens on (port 0: any free port)")
	fs.IntVar(&f.replicas, "replicas", 1, "replicas of serpent's streams (3 on a 3-node cluster)")
	fs.DurationVar(&f.connectTimeout, "connect-timeout", 0, "give up when NATS, or a leader of each stream and bucket, is not there within this time (0: keep trying)")
	fs.BoolVar(&f.natsLog, "nats-log", false, "show the embedded NATS server's notices, its start-up banner among them (its warnings and errors always show)")
	fs.BoolVar(&f.updateStreams, "update-streams", false, "change existing streams in place when their settings differ (never destructively)")
	fs.StringVar(&f.apiURL, "api-url", "", "Serper.live base URL (env SERPER_LIVE_URL; default "+DefaultAPIURL+" with a token, the built-in sandbox without)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the API token (default: env "+serper.TokenEnv+")")
	fs.DurationVar(&f.clientTimeout, "client-timeout", serper.DefaultTimeout, "how long to wait for a search (the API may run one for 90 s)")
	fs.StringVar(&f.accountsFile, "accounts", "", "JSON file of API accounts beside the default one: [{name, base_url, token_env, token_file, limits}]")
	fs.StringVar(&f.sandboxURL, "sandbox-url", "", "use a sandbox running elsewhere (serpent sandbox) instead of the built-in one; short client timeouts and leases are allowed")
	fs.StringVar(&f.sandboxConfig, "sandbox-config", "", "JSON config of the built-in sandbox (seed, faults, durations), as for serpent sandbox --config; refused where there is no built-in sandbox (a token, an API URL or --sandbox-url given)")
	fs.IntVar(&f.workers, "workers", 64, "due jobs this process works on at once (at least 1)")
	fs.IntVar(&f.intakeConc, "intake-concurrency", 64, "schedule commands handled at once, at least 1 (a new job due now is run by intake itself)")
	fs.BoolVar(&f.groupCommit, "group-commit", true, "write appends of concurrent jobs together in atomic batches (one disk flush for many)")
	fs.StringVar(&f.httpAddr, "http", "127.0.0.1:8080", "address of the status page, /metrics, /healthz and /readyz (empty: none)")
	f.ops.register(fs)
	fs.DurationVar(&f.grace, "grace", 15*time.Second, "on SIGINT or SIGTERM, how long in-flight requests may finish before they are cut (a cut one resumes later with the same key)")
	fs.DurationVar(&f.ackWait, "ack-wait", 30*time.Second, "how long a due job may go without a sign of life from its worker before another worker takes it")
	fs.DurationVar(&f.sweepEvery, "sweep-every", 10*time.Minute, "how often to look for jobs and recurring schedules whose timer was lost, in turns with the other engines (0: only at start)")
	fs.StringVar(&f.rulesFile, "outcome-rules", "", "JSON file of extra outcome table rows, e.g. [{\"status\":500,\"class\":\"retryable\",\"action\":\"retry_new_key\"}]")
	fs.StringVar(&f.name, "name", "", "worker name in events and logs (default host-pid)")
	fs.StringVar(&f.log.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.log.level, "log-level", "info", "log level: debug, info, warn or error")
	dur := func(p *events.Duration, name, usage string) {
		fs.Func(name, fmt.Sprintf("%s (default %s)", usage, p.D()), func(s string) error {
			d, err := time.ParseDuration(s)
			*p = events.Duration(d)
			return err
		})
	}
	dur(&f.policy.ReplayWindow, "replay-window", "how long the API replays a key (at most 15m with the real API)")
	dur(&f.policy.SafetyMargin, "safety-margin", "time kept free at the end of a key's replay window (with the real API, at least the 10 s a request may take to reach it)")
	dur(&f.policy.Lease, "lease", "how long a send keeps other workers off a job; at least the client timeout plus 10 s")
	dur(&f.policy.BaseDelay, "base-delay", "first backoff ceiling")
	dur(&f.policy.MaxDelay, "max-delay", "largest backoff")
	dur(&f.policy.MaxAge, "max-age", "job age after which no new purchase attempt starts (counted from the job's slot, from when it was scheduled if that is later, or from its last re-purchase)")
	fs.IntVar(&f.policy.MaxKeys, "max-keys", f.policy.MaxKeys, "attempt keys a job may use")
	fs.DurationVar(&f.retention, "retention", DefaultRetention, "how long a job stays in the live log and the views after its slot; then only SERP_ARCHIVE keeps it, and intake refuses its slot (slot_expired). At least twice --max-age plus three --skew-margin (0: keep every job live for ever)")
	fs.DurationVar(&f.skewMargin, "skew-margin", aggregate.DefaultSkewMargin, "how far apart the clocks of engines may be; the retention checks keep this much room")
	fs.Func("first-slot", "the earliest slot this deployment takes (RFC 3339); intake refuses earlier ones (before_first_slot), which another deployment runs. Default: every slot", func(s string) error {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return fmt.Errorf("not an RFC 3339 time such as 2027-01-01T00:00:00Z: %w", err)
		}
		f.firstSlot = t
		return nil
	})
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: serpent run [flags]

Runs the engine: takes schedule commands from serp.cmd.schedule (and the
"serpent" micro service), wakes due jobs, buys each observation at most once,
and reconciles unknown outcomes with the billing ledger.

With no NATS URL it runs an embedded JetStream server (fsync on every write)
with its data in --data, listening on --nats-listen. With no API token
($SERPER_LIVE_TOKEN or --token-file) it talks to a built-in sandbox and buys
nothing. Flags:

`)
		fs.PrintDefaults()
	}
	return fs, f
}

// token finds the API token: --token-file, then $SERPER_LIVE_TOKEN.
func (f *engineFlags) token(env func(string) string) (string, error) {
	if f.tokenFile != "" {
		return serper.TokenFromFile(f.tokenFile)
	}
	return serper.LoadToken(env, "")
}

// table is the outcome table with the deployment's rows.
func (f *engineFlags) table() (aggregate.Table, error) {
	if f.rulesFile == "" {
		return aggregate.DefaultTable(), nil
	}
	data, err := os.ReadFile(f.rulesFile)
	if err != nil {
		return aggregate.Table{}, fmt.Errorf("%w: --outcome-rules: %v", errUsage, err)
	}
	t, err := aggregate.ParseRules(data)
	if err != nil {
		return aggregate.Table{}, fmt.Errorf("%w: --outcome-rules %s: %v", errUsage, f.rulesFile, err)
	}
	return t, nil
}
