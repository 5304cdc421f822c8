package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/serpent-engine/serpent/projections"
)

func init() {
	register(command{name: "ledger", summary: "show what was bought: per day, or one day, job or key, from the serp_ledger bucket", run: runLedger})
}

func runLedger(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("ledger", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nf natsFlags
	nf.register(fs)
	out := outputFlag(fs)
	day := fs.String("day", "", "one UTC day of purchase, YYYY-MM-DD, or today")
	job := fs.String("job", "", "one job's purchases")
	key := fs.String("key", "", "one attempt key")
	price := fs.Int64("price-micros", 0, "re-estimate spend at this price per page with results (default: the price the engine estimated with)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: serpent ledger [--day YYYY-MM-DD | --job JOB | --key KEY] [flags]

Shows what serpent bought, from the serp_ledger bucket: every day by
default. A day is the UTC day a search was sent and bought, by the NATS
server's clock, not the day of the job's slot. Spend is an ESTIMATE from pages with results times a price per
page (free pages and price changes are not known to serpent); charges found
by reconciliation are exact. "serpent audit --ledger URL" checks the
provider's own ledger. Flags:

`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: ledger: %v", errUsage, err)
	}
	if err := out.check(); err != nil {
		return err
	}
	chosen := 0
	for _, s := range []string{*day, *job, *key} {
		if s != "" {
			chosen++
		}
	}
	if chosen > 1 {
		return fmt.Errorf("%w: ledger takes one of --day, --job and --key", errUsage)
	}
	if *day == "today" {
		*day = time.Now().UTC().Format(projections.DayLayout)
	}
	if *day != "" {
		if _, err := time.Parse(projections.DayLayout, *day); err != nil {
			return fmt.Errorf("%w: --day %q: use YYYY-MM-DD", errUsage, *day)
		}
	}
	nc, js, err := nf.connect(env, nil, "serpent ledger")
	if err != nil {
		return err
	}
	defer nc.Close()
	lagNote(ctx, js, stderr)

	one := func(target projections.Target, v any, print func() error) error {
		found, err := getValue(ctx, js, target.Bucket, target.Key, v)
		if err != nil {
			return err
		}
		if !found {
			return &exitError{code: 1, err: fmt.Errorf("nothing in %s under %s", target.Bucket, target.Key)}
		}
		if out.json() {
			return printJSON(stdout, v)
		}
		return print()
	}
	switch {
	case *job != "":
		var v projections.JobLedger
		return one(projections.JobTarget(*job), &v, func() error { return printJobLedger(stdout, v) })
	case *key != "":
		var v projections.KeyLedger
		return one(projections.KeyTarget(*key), &v, func() error { return printKeyLedger(stdout, v) })
	}
	var days []projections.DayLedger
	err = eachValue(ctx, js, projections.LedgerBucket, projections.LedgerDayPrefix, func(k string, value []byte) error {
		var d projections.DayLedger
		if err := json.Unmarshal(value, &d); err != nil {
			return fmt.Errorf("%s/%s is not a value serpent wrote: %w", projections.LedgerBucket, k, err)
		}
		if *day == "" || d.Day == *day {
			if *price > 0 {
				d.PriceMicrosPerPage, d.EstSpendMicros = *price, int64(d.Pages)**price+d.ChargedAmountMicros
			}
			days = append(days, d)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(days, func(a, b projections.DayLedger) int { return strings.Compare(a.Day, b.Day) })
	if *day != "" && len(days) == 0 {
		return &exitError{code: 1, err: fmt.Errorf("nothing in %s for %s: nothing was bought that UTC day (the ledger counts a search on the day it was bought, not on its slot's day)", projections.LedgerBucket, *day)}
	}
	if out.json() {
		if days == nil {
			days = []projections.DayLedger{}
		}
		return printJSON(stdout, days)
	}
	return printDays(stdout, days)
}

func printDays(w io.Writer, days []projections.DayLedger) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "DAY\tSENDS\tREPLAYS\tSEARCHES\tPAGES\tCHARGED NO RESULT\tCHARGED (EXACT)\tRE-PURCHASES\tEST. SPEND\t")
	var sum projections.DayLedger
	for _, d := range days {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t~%s\t\n", d.Day, d.Sends, d.Replays, d.Searches, d.Pages,
			d.ChargedNoResult, dollars(d.ChargedAmountMicros), d.Repurchases, dollars(d.EstSpendMicros))
		sum.Sends, sum.Replays, sum.Searches, sum.Pages = sum.Sends+d.Sends, sum.Replays+d.Replays, sum.Searches+d.Searches, sum.Pages+d.Pages
		sum.ChargedNoResult, sum.ChargedAmountMicros = sum.ChargedNoResult+d.ChargedNoResult, sum.ChargedAmountMicros+d.ChargedAmountMicros
		sum.Repurchases, sum.EstSpendMicros = sum.Repurchases+d.Repurchases, sum.EstSpendMicros+d.EstSpendMicros
	}
	if len(days) > 1 {
		fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t~%s\t\n", sum.Sends, sum.Replays, sum.Searches, sum.Pages,
			sum.ChargedNoResult, dollars(sum.ChargedAmountMicros), sum.Repurchases, dollars(sum.EstSpendMicros))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(days) > 0 {
		fmt.Fprintf(w, "est. spend: pages × %s per page + exact charges; free pages not counted\n", dollars(days[len(days)-1].PriceMicrosPerPage))
	}
	return nil
}

func printJobLedger(w io.Writer, v projections.JobLedger) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "job\t%s\n", v.JobID)
	fmt.Fprintf(tw, "keys\t%s\n", strings.Join(v.Keys, ", "))
	fmt.Fprintf(tw, "sends\t%d (%d replays)\n", v.Sends, v.Replays)
	fmt.Fprintf(tw, "purchases\t%d (%d re-purchases authorised)\n", v.Purchases, v.RepurchasesAuthorized)
	if v.DoubleCharges > 0 {
		fmt.Fprintf(tw, "double charges\t%d more by the API under one key, found live\n", v.DoubleCharges)
	}
	fmt.Fprintf(tw, "accepted key\t%s (%d pages)\n", orDash(v.AcceptedKey), v.Pages)
	for _, c := range v.Charges {
		fmt.Fprintf(tw, "charge\t%s on %s: %d billed pages, %s\n", c.RequestID, c.Key, c.BilledPages, dollars(c.AmountMicros))
	}
	return tw.Flush()
}

func printKeyLedger(w io.Writer, v projections.KeyLedger) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "key\t%s\n", v.Key)
	fmt.Fprintf(tw, "job\t%s (attempt %d, %s)\n", v.JobID, v.Attempt, orDash(v.Reason))
	fmt.Fprintf(tw, "first sent\t%s, deadline %s\n", stampPtr(v.FirstSend), stampPtr(v.Deadline))
	fmt.Fprintf(tw, "sends\t%d (%d replays)\n", v.Sends, v.Replays)
	fmt.Fprintf(tw, "request ids\t%s\n", orDash(strings.Join(v.RequestIDs, ", ")))
	fmt.Fprintf(tw, "last class\t%s\n", orDash(v.LastClass))
	fmt.Fprintf(tw, "accepted\t%t (%d pages)\n", v.Accepted, v.Pages)
	if v.DeadlineReached {
		fmt.Fprintf(tw, "deadline\treached with the outcome unknown\n")
	}
	if v.Checked != "" {
		fmt.Fprintf(tw, "charges checked\t%s\n", v.Checked)
	}
	if v.Reconciled != "" {
		fmt.Fprintf(tw, "reconciled\t%s\n", v.Reconciled)
	}
	for _, c := range v.Charges {
		fmt.Fprintf(tw, "charge\t%s: %d billed pages, %s\n", c.RequestID, c.BilledPages, dollars(c.AmountMicros))
	}
	return tw.Flush()
}

// dollars writes micro-dollars as dollars.
func dollars(micros int64) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	return fmt.Sprintf("%s$%d.%06d", sign, micros/1e6, micros%1e6)
}
