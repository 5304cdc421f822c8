package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

func init() {
	register(command{name: "projections", summary: "rebuild the status, ledger and observation buckets from the log, or show their lag", run: runProjections})
}

// runProjections is "serpent projections rebuild|lag".
func runProjections(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	usage := func() {
		fmt.Fprint(stderr, `Usage: serpent projections rebuild [flags]
       serpent projections lag [flags]

rebuild  folds SERP_EVENTS from sequence 1 into fresh staging buckets, then
         pauses the projection runners and switches the live buckets over
         key by key: a reader sees each value whole, old or new, never
         missing. Safe while the engine runs.
lag      shows how far the projections trail the log.

Run "serpent projections <sub> -h" for the flags.
`)
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		usage()
		if len(args) == 0 {
			return fmt.Errorf("%w: projections needs rebuild or lag", errUsage)
		}
		return nil
	}
	switch args[0] {
	case "rebuild":
		return runRebuild(ctx, args[1:], env, stdout, stderr)
	case "lag":
		return runLag(ctx, args[1:], env, stdout, stderr)
	}
	usage()
	return fmt.Errorf("%w: unknown projections command %q", errUsage, args[0])
}

func runRebuild(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("projections rebuild", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nf natsFlags
	nf.register(fs)
	out := outputFlag(fs)
	keep := fs.Bool("keep-staging", false, "keep the staging buckets (serp_*"+projector.StagingSuffix+") after the switch")
	price := fs.Int64("price-micros", projections.DefaultPriceMicrosPerPage, "price of a page with results in the day ledger's spend estimate (as the engine's)")
	ttl := fs.Duration("lease-ttl", projector.DefaultLeaseTTL, "the projection runners' lease TTL")
	replicas := fs.Int("replicas", 1, "replicas of the buckets, if they must be created")
	prog := progressFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: projections rebuild: %v", errUsage, err)
	}
	if err := out.check(); err != nil {
		return err
	}
	nc, js, err := nf.connect(env, nil, "serpent projections rebuild")
	if err != nil {
		return err
	}
	defer nc.Close()
	bar := newProgress(stderr, *prog)
	defer bar.done()
	rep, err := projector.Rebuild(ctx, js, projector.RebuildOptions{Replicas: *replicas, KeepStaging: *keep,
		LeaseTTL: *ttl, Projection: projections.Config{PriceMicrosPerPage: *price}, Progress: bar.update})
	bar.done()
	if err != nil {
		return err
	}
	if out.json() {
		return printJSON(stdout, rep)
	}
	fmt.Fprintf(stdout, "rebuilt %d values from %d events (up to sequence %d) in %s: %d unchanged, %d written, %d deleted\n",
		rep.Values, rep.Events, rep.UpTo, rep.Took.Round(time.Millisecond), rep.Unchanged, rep.Written, rep.Deleted)
	return nil
}

func runLag(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("projections lag", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nf natsFlags
	nf.register(fs)
	out := outputFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: projections lag: %v", errUsage, err)
	}
	if err := out.check(); err != nil {
		return err
	}
	nc, js, err := nf.connect(env, nil, "serpent projections lag")
	if err != nil {
		return err
	}
	defer nc.Close()
	lag, err := projector.ReadLag(ctx, js, "", time.Now())
	if err != nil {
		return err
	}
	if out.json() {
		return printJSON(stdout, lag)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "applied up to\t%d of %d\n", lag.Applied, lag.Last)
	fmt.Fprintf(tw, "pending events\t%d\n", lag.Pending)
	fmt.Fprintf(tw, "behind the log\t%s\n", lag.Behind.Round(time.Millisecond))
	if !lag.AppliedAt.IsZero() {
		fmt.Fprintf(tw, "newest applied event\t%s (%s ago)\n", lag.AppliedAt.UTC().Format(time.RFC3339), lag.Age.Round(time.Second))
	}
	fmt.Fprintf(tw, "runner\t%s\n", orDash(lag.Holder))
	if lag.Paused {
		fmt.Fprintf(tw, "paused\tyes, for a rebuild\n")
	}
	return tw.Flush()
}

// output is the -o flag of the view commands.
type output struct{ v *string }

func outputFlag(fs *flag.FlagSet) output {
	return output{fs.String("o", "table", "output: table (for people) or json (for scripts)")}
}

func (o output) check() error {
	if *o.v != "table" && *o.v != "json" {
		return fmt.Errorf("%w: -o %q: use table or json", errUsage, *o.v)
	}
	return nil
}

func (o output) json() bool { return *o.v == "json" }

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// openBucket opens a projection bucket, explaining a missing one.
func openBucket(ctx context.Context, js jetstream.JetStream, name string) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("bucket %s does not exist: the projections have not run yet (serpent run --projections)", name)
	}
	return kv, err
}

// getValue reads and decodes one projection value; found is false when the
// key has none.
func getValue(ctx context.Context, js jetstream.JetStream, bucket, key string, v any) (found bool, err error) {
	kv, err := openBucket(ctx, js, bucket)
	if err != nil {
		return false, err
	}
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrInvalidKey) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		return false, fmt.Errorf("%s/%s is not a value serpent wrote: %w", bucket, key, err)
	}
	return true, nil
}

// eachValue calls fn with every value of a bucket whose key starts with
// prefix ("" for all), as stored now.
func eachValue(ctx context.Context, js jetstream.JetStream, bucket, prefix string, fn func(key string, value []byte) error) error {
	kv, err := openBucket(ctx, js, bucket)
	if err != nil {
		return err
	}
	filter := ">"
	if prefix != "" {
		filter = prefix + ">"
	}
	w, err := kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	if err != nil {
		return err
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return ctx.Err()
			}
			if e == nil {
				return nil
			}
			if err := fn(e.Key(), e.Value()); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// lagNote warns on stderr when the views trail the log.
func lagNote(ctx context.Context, js jetstream.JetStream, stderr io.Writer) {
	lag, err := projector.ReadLag(ctx, js, "", time.Now())
	if err == nil && lag.Pending > 0 {
		fmt.Fprintf(stderr, "note: the projections trail the log by %d events (%s)\n", lag.Pending, lag.Behind.Round(time.Millisecond))
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
