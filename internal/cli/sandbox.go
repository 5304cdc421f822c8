package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

func init() {
	register(command{name: "sandbox", summary: "run the Serper.live API simulator (ledger, stats, seeded faults)", run: runSandbox})
}

// sandboxFlags declares the flags of "serpent sandbox" on a new FlagSet and
// returns it with the values they fill: cfg and the two that are not
// sandbox.Config fields.
func sandboxFlags(stderr io.Writer) (fs *flag.FlagSet, cfg *sandbox.Config, listen, configFile *string, verbose *bool) {
	fs = flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg = &sandbox.Config{SearchTime: 50 * time.Millisecond}
	listen = fs.String("listen", "127.0.0.1:8790", "address to listen on (port 0 picks a free port)")
	configFile = fs.String("config", "", "JSON file with a sandbox config (durations as \"15m\"); flags given explicitly override it")
	verbose = fs.Bool("v", false, "log every request at debug level (never the token)")
	fs.StringVar(&cfg.Token, "token", "", "bearer token to accept (default: $"+serper.TokenEnv+", else \""+sandbox.DefaultToken+"\")")
	fs.Int64Var(&cfg.Seed, "seed", 0, "seed of the fault draws and request ids: same seed and request order, same faults")
	fs.DurationVar(&cfg.ReplayWindow, "replay-window", sandbox.DefaultReplayWindow, "how long a key's first response is replayed")
	fs.DurationVar(&cfg.SearchTime, "search-time", cfg.SearchTime, "how long a search runs (0: at once)")
	fs.DurationVar(&cfg.SlowSearchTime, "slow-search-time", sandbox.DefaultSlowSearchTime, "how long a search hit by the slow-search fault runs")
	fs.DurationVar(&cfg.RetryAfter, "retry-after", sandbox.DefaultRetryAfter, "the delay a 429 asks for")
	fs.DurationVar(&cfg.BillingDelay, "billing-delay", sandbox.DefaultBillingDelay, "how long after its search ends a search hit by the billing-late fault is charged")
	fs.IntVar(&cfg.FreePages, "free-pages", 0, "free pages of the account, used before any page is billed")
	fs.Int64Var(&cfg.PriceMicros, "price-micros", sandbox.DefaultPriceMicros, "price of one billed page, in micro-dollars")
	for _, p := range cfg.Faults.Flags() {
		fs.Float64Var(p.P, p.Name, 0, "probability (0..1): "+p.Help)
	}
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: serpent sandbox [flags]

Runs a simulator of the Serper.live search API until interrupted. It prints
its base URL on stdout, then serves:

  POST /v1/search            the search (Authorization: Bearer, Idempotency-Key: a UUID)
  GET  /v1/billing/ledger    ?idempotencyKey=K&requestId=R&day=YYYY-MM-DD (repeatable or
                             comma lists; a day lists every charge of that UTC day)
  GET  /v1/sandbox/stats     executions, charges, replays, faults, charges per body

Fault draws come from --seed: the same requests in the same order meet the
same faults. Flags:

`)
		fs.PrintDefaults()
	}
	return fs, cfg, listen, configFile, verbose
}

func runSandbox(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs, cfg, listen, configFile, verbose := sandboxFlags(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: sandbox: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: sandbox takes no arguments, got %q", errUsage, fs.Args())
	}
	if *configFile != "" {
		if err := mergeConfigFile(fs, cfg, *configFile); err != nil {
			return err
		}
	}
	notice := resolveSandboxToken(cfg, env)
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: sandbox: %w", errUsage, err)
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	srv := sandbox.New(*cfg)
	url, err := srv.Start(*listen)
	if err != nil {
		return fmt.Errorf("sandbox: listen on %s: %w", *listen, err)
	}
	fmt.Fprintln(stderr, notice)
	cfg.Logger.Info("sandbox: serving", "url", url, "config", *cfg)
	if _, err := fmt.Fprintln(stdout, url); err != nil {
		_ = srv.Close()
		return err
	}
	<-ctx.Done()
	err = srv.Close()
	st := srv.Stats()
	cfg.Logger.Info("sandbox: stopped", "requests", st.Requests, "executions", st.Executions,
		"charges", st.Charges, "max_charges_per_body", st.MaxChargesPerBody)
	return err
}

// mergeConfigFile loads a JSON sandbox.Config over the flags' defaults and
// lays the flags given explicitly over that.
func mergeConfigFile(fs *flag.FlagSet, cfg *sandbox.Config, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w: sandbox: --config: %v", errUsage, err)
	}
	_, base, _, _, _ := sandboxFlags(io.Discard)
	if err := json.Unmarshal(data, base); err != nil {
		return fmt.Errorf("%w: sandbox: --config %s: %v", errUsage, path, err)
	}
	// The flags write into *cfg: remember the ones given, take the file's
	// config, then set those again over it.
	given := map[string]string{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = f.Value.String() })
	*cfg = *base
	for name, value := range given {
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("%w: sandbox: -%s: %v", errUsage, name, err)
		}
	}
	return nil
}

// resolveSandboxToken fills cfg.Token when empty and says where it came from
// (never what it is, unless it is the public sandbox token).
func resolveSandboxToken(cfg *sandbox.Config, env func(string) string) string {
	switch {
	case cfg.Token != "":
		return "sandbox: accepting the token given by --token or --config"
	case env(serper.TokenEnv) != "":
		cfg.Token = env(serper.TokenEnv)
		return "sandbox: accepting the token from $" + serper.TokenEnv
	}
	cfg.Token = sandbox.DefaultToken
	return fmt.Sprintf("sandbox: accepting the fixed sandbox token %q (set --token or $%s to change it)", sandbox.DefaultToken, serper.TokenEnv)
}
