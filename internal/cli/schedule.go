package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
)

func init() {
	register(command{name: "schedule", summary: "publish a schedule command as an upstream system would; prints the job id", run: runSchedule})
}

func runSchedule(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("schedule", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nf natsFlags
	nf.register(fs)
	var c aggregate.ScheduleCommand
	fs.StringVar(&c.Slot, "slot", "", "the observation's slot, RFC 3339 (default: now, to the minute)")
	fs.StringVar(&c.Query, "query", "", "search query (required)")
	fs.StringVar(&c.Country, "country", "US", "two-letter country code")
	fs.StringVar(&c.Language, "language", "en", "two-letter language code")
	fs.StringVar(&c.Device, "device", "desktop", "desktop or mobile")
	limit := fs.Int("limit", aggregate.DefaultLimit, "number of results, 1 to 100")
	fs.StringVar(&c.Account, "account", "", "API account to buy with (default account if empty)")
	fs.StringVar(&c.Priority, "priority", "", "high or normal")
	file := fs.String("f", "", "publish this file's JSON command as is (- for stdin) instead of the flags")
	noCheck := fs.Bool("no-validate", false, "publish without checking the command first (to see how serpent rejects it)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: serpent schedule --query Q [flags]

Publishes one schedule command on serp.cmd.schedule, durably (JetStream), as
an upstream system would, and prints the job id it maps to. The same slot and
search context always map to the same job, however often it is published.
Flags:

`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: schedule: %v", errUsage, err)
	}
	if len(pos) > 0 {
		// A query of several words without quotes would otherwise buy
		// its first word, now.
		return fmt.Errorf("%w: schedule takes flags only, not %q (quote a query of several words: --query \"espresso scale\")", errUsage, strings.Join(pos, " "))
	}
	if *file != "" {
		var search []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "slot", "query", "country", "language", "device", "limit", "account", "priority":
				search = append(search, "--"+f.Name)
			}
		})
		if len(search) > 0 {
			return fmt.Errorf("%w: -f publishes the file's command as it is; %s would be ignored", errUsage, strings.Join(search, ", "))
		}
	}
	var payload []byte
	switch {
	case *file == "-":
		b, err := io.ReadAll(io.LimitReader(os.Stdin, engine.MaxCommandBytes+1))
		if err != nil {
			return err
		}
		payload = b
	case *file != "":
		b, err := os.ReadFile(*file)
		if err != nil {
			return fmt.Errorf("%w: -f: %v", errUsage, err)
		}
		payload = b
	default:
		if c.Slot == "" {
			c.Slot = time.Now().UTC().Truncate(time.Minute).Format(time.RFC3339)
		}
		c.Limit = limit // as given: --limit 0 is refused, not taken for the default
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		payload = b
	}
	jobID := ""
	if !*noCheck {
		cmd, err := engine.ParseCommand(payload)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		sched, err := aggregate.NewSchedule(cmd, aggregate.DefaultPolicy(), "")
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		jobID = sched.JobID
	}
	nc, js, err := nf.connect(env, nil, "serpent schedule")
	if err != nil {
		return err
	}
	defer nc.Close()
	ack, err := js.Publish(ctx, snats.ScheduleSubject, payload)
	if err != nil {
		return fmt.Errorf("publish on %s: %w (is serpent run up, or the %s stream provisioned?)", snats.ScheduleSubject, err, snats.CommandStream)
	}
	if jobID == "" {
		fmt.Fprintf(stdout, "published as %s #%d (not validated)\n", ack.Stream, ack.Sequence)
		return nil
	}
	fmt.Fprintln(stdout, jobID)
	return nil
}
