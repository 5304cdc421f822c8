package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
)

func init() {
	register(command{name: "accounts", summary: "show API accounts' spend and limits, or change a limit (applies at once)", run: runAccounts})
}

const accountsUsage = `Usage: serpent accounts [-o json]
       serpent accounts set ACCOUNT [--max-in-flight N] [--rate R] [--burst B]
                                    [--daily-pages P] [--daily-micros M] [--price-micros X]

Every API account can be held to limits that every worker of every engine
obeys: searches in flight, a rate (searches a second, with a burst), and a
daily budget in billed pages or money (micro-dollars). A limit that is reached
makes jobs wait; it never fails them. A resend of a key that was sent before
cannot buy, so the budget never holds it back. A 429 or Retry-After from the
API pauses the whole account. Limits are kept in the KV bucket serp_accounts;
"set" changes only the limits given (0 removes one) and every engine applies
the change at once. A stored value the engines refuse (shown under REFUSED)
is overwritten by the limits given alone, with a warning. The default account
is "default". Flags:

`

func runAccounts(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("accounts", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nf natsFlags
	nf.register(fs)
	out := outputFlag(fs)
	inFlight := fs.Int("max-in-flight", 0, "set: searches in flight at once over every worker (0: no limit)")
	rate := fs.Float64("rate", 0, "set: searches a second on average (0: no limit)")
	burst := fs.Int("burst", 0, "set: searches that may start at once above the rate")
	pages := fs.Int("daily-pages", 0, "set: pages the account may buy a UTC day (0: no limit)")
	micros := fs.Int64("daily-micros", 0, "set: micro-dollars the account may spend a UTC day (0: no limit)")
	price := fs.Int64("price-micros", 0, "set: price of a page in micro-dollars (0: the default, 1000)")
	fs.Usage = func() { fmt.Fprint(fs.Output(), accountsUsage); fs.PrintDefaults() }
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: accounts: %v", errUsage, err)
	}
	if err := out.check(); err != nil {
		return err
	}
	limitFlags := []string{"max-in-flight", "rate", "burst", "daily-pages", "daily-micros", "price-micros"}
	if len(pos) == 0 {
		// A limit given without "set ACCOUNT" would change nothing.
		var given string
		fs.Visit(func(f *flag.Flag) {
			if slices.Contains(limitFlags, f.Name) {
				given = f.Name
			}
		})
		if given != "" {
			return fmt.Errorf("%w: --%s changes a limit of one account: serpent accounts set ACCOUNT --%s ...", errUsage, given, given)
		}
	}
	nc, js, err := nf.connect(env, nil, "serpent accounts")
	if err != nil {
		return err
	}
	defer nc.Close()
	switch {
	case len(pos) == 0:
	case pos[0] == "set" && len(pos) == 2:
		if err := setLimits(ctx, js, pos[1], fs, limitFlags, stderr, map[string]func(*accounts.Limits){
			"max-in-flight": func(l *accounts.Limits) { l.MaxInFlight = *inFlight },
			"rate":          func(l *accounts.Limits) { l.RatePerSec = *rate },
			"burst":         func(l *accounts.Limits) { l.Burst = *burst },
			"daily-pages":   func(l *accounts.Limits) { l.DailyPages = *pages },
			"daily-micros":  func(l *accounts.Limits) { l.DailyMicros = *micros },
			"price-micros":  func(l *accounts.Limits) { l.PriceMicros = *price },
		}); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: accounts takes no arguments, or: set ACCOUNT [flags]", errUsage)
	}
	st, err := accountStatuses(ctx, js, time.Now())
	if err != nil {
		return err
	}
	if out.json() {
		return printJSON(stdout, st)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ACCOUNT\tIN FLIGHT\tRATE\tSPENT TODAY\tBUDGET\tPAUSED\tWAITING\tREFUSED")
	for _, a := range st {
		l := a.Limits
		inFlight, rate, budget := ofLimit(a.InFlight, l.MaxInFlight), rateText(l), budgetText(l)
		if r := a.Refused; r != nil && r.Keeping == 0 {
			// No engine applies limits it kept: none to show as applied.
			inFlight, rate, budget = fmt.Sprintf("%d, held", a.InFlight), "held", "held"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d pages, %s\t%s\t%s\t%s\t%s\n", a.Account, inFlight, rate,
			a.SpentToday.Pages, dollars(a.SpentToday.Micros), budget, pausedText(a), waitingText(a), refusedText(a))
	}
	return tw.Flush()
}

// setLimits changes the limits given by flags of one account, keeping the
// others. A stored value the engines refuse is overwritten, with a
// warning, by the limits given alone: which of its limits held is not
// known.
func setLimits(ctx context.Context, js jetstream.JetStream, account string, fs *flag.FlagSet, limitFlags []string,
	stderr io.Writer, set map[string]func(*accounts.Limits)) error {
	if err := engine.ValidateAccount(account); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	kv, err := snats.OpenKV(ctx, js, snats.AccountsBucket)
	if err != nil {
		return err
	}
	stored, err := engine.ReadLimits(ctx, kv, account)
	if err != nil {
		return err
	}
	given := 0
	lim := stored.Limits
	fs.Visit(func(f *flag.Flag) {
		if s, ok := set[f.Name]; ok {
			s(&lim)
			given++
		}
	})
	if stored.Refused != nil {
		if given == 0 {
			return fmt.Errorf("%w: account %q: key %s of bucket %s holds limits the engines refuse (%v): give the limits it should have (--%s ...)",
				errUsage, account, stored.Key, snats.AccountsBucket, stored.Refused, strings.Join(limitFlags, ", --"))
		}
		fmt.Fprintf(stderr, "serpent accounts: warning: key %s of bucket %s holds limits the engines refuse (%v): %s; overwritten with the limits given alone\n",
			stored.Key, snats.AccountsBucket, stored.Refused, stored.Value)
	}
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("%w: account %q: %v", errUsage, account, err)
	}
	if err := engine.ReplaceLimits(ctx, kv, account, lim, stored.Revision); err != nil {
		if errors.Is(err, engine.ErrLimitsChanged) {
			return fmt.Errorf("%w: run serpent accounts set again", err)
		}
		return err
	}
	return nil
}

// accountStatuses reads every API account's limits and the state the
// engines share in serp_accounts, at now.
func accountStatuses(ctx context.Context, js jetstream.JetStream, now time.Time) ([]engine.AccountStatus, error) {
	kv, err := snats.OpenKV(ctx, js, snats.AccountsBucket)
	if err != nil {
		return nil, err
	}
	return engine.AccountStatuses(ctx, kv, now)
}

func ofLimit(n, limit int) string {
	if limit == 0 {
		return fmt.Sprintf("%d", n)
	}
	return fmt.Sprintf("%d of %d", n, limit)
}

func rateText(l accounts.Limits) string {
	if l.RatePerSec == 0 {
		return "-"
	}
	return fmt.Sprintf("%g/s, burst %d", l.RatePerSec, max(l.Burst, 1))
}

func budgetText(l accounts.Limits) string {
	var parts []string
	if l.DailyPages > 0 {
		parts = append(parts, fmt.Sprintf("%d pages", l.DailyPages))
	}
	if l.DailyMicros > 0 {
		parts = append(parts, dollars(l.DailyMicros))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ") + " a day"
}

func pausedText(a engine.AccountStatus) string {
	if a.PausedUntil == nil {
		return "-"
	}
	return "until " + a.PausedUntil.UTC().Format(time.RFC3339) + " (" + a.PauseReason + ")"
}

func waitingText(a engine.AccountStatus) string {
	if a.Waiting == 0 {
		return "0"
	}
	var parts []string
	for _, r := range engine.WaitReasons {
		if n := a.WaitingWhy[r]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, r))
		}
	}
	return fmt.Sprintf("%d (%s)", a.Waiting, strings.Join(parts, ", "))
}

// refusedText shows a stored value the engines refuse, and what they do
// instead.
func refusedText(a engine.AccountStatus) string {
	r := a.Refused
	if r == nil {
		return "-"
	}
	var engines []string
	if r.Keeping > 0 {
		engines = append(engines, fmt.Sprintf("%d engines keep the limits before", r.Keeping))
	}
	if r.Holding > 0 {
		engines = append(engines, fmt.Sprintf("%d engines hold new purchases", r.Holding))
	}
	if len(engines) == 0 {
		engines = append(engines, "no engine reported")
	}
	return fmt.Sprintf("%s (%s): %s", r.Value, r.Error, strings.Join(engines, ", "))
}

// accountDef is one API account in the --accounts file.
type accountDef struct {
	Name      string          `json:"name"`
	BaseURL   string          `json:"base_url,omitempty"`
	TokenEnv  string          `json:"token_env,omitempty"`
	TokenFile string          `json:"token_file,omitempty"`
	Limits    json.RawMessage `json:"limits,omitempty"`
	// limits are Limits as the engines read them; nil when not given.
	limits *accounts.Limits
}

// readAccounts reads the --accounts file strictly.
func readAccounts(path string) ([]accountDef, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --accounts: %v", errUsage, err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	var defs []accountDef
	if err := dec.Decode(&defs); err != nil {
		return nil, fmt.Errorf("%w: --accounts %s: a JSON list of {name, base_url, token_env, token_file, limits}: %v", errUsage, path, err)
	}
	var errs []error
	seen := map[string]bool{}
	for i, d := range defs {
		switch {
		case d.Name == "":
			errs = append(errs, fmt.Errorf("account %d has no name", i+1))
		case seen[d.Name]:
			errs = append(errs, fmt.Errorf("account %q appears twice", d.Name))
		}
		seen[d.Name] = true
		if d.Limits != nil {
			lim, err := accounts.Decode(d.Limits)
			if err != nil {
				errs = append(errs, fmt.Errorf("account %q: %v", d.Name, err))
			}
			defs[i].limits = &lim
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: --accounts %s: %v", errUsage, path, err)
	}
	return defs, nil
}
