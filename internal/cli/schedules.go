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

	natsgo "github.com/nats-io/nats.go"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/nats/service"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/recurring"
)

func init() {
	register(command{name: "schedules", summary: "create, list, show, pause, resume and delete recurring schedules", run: runSchedules})
}

const schedulesUsage = `Usage: serpent schedules <create|list|show|pause|resume|delete> [ID] [flags]

Recurring schedules order one job per slot, the way an upstream system
publishing a command for every slot would. They are kept by the running
engine (the "serpent" micro service, serpent.schedules.*):

  serpent schedules create --id espresso-hourly --schedule "0 * * * *" \
      --query "espresso scale" --device mobile [--time-zone Europe/Berlin]
      [--start T] [--end T] [--catch-up skip|fire] [--catch-up-limit N]
  serpent schedules list
  serpent schedules show espresso-hourly        # last and next slot, recent jobs and their states
  serpent schedules pause|resume|delete espresso-hourly

A schedule is a cron expression of 5 fields (or 6 with seconds first), a
descriptor (@hourly, @daily, @weekly, @monthly, @yearly) or "@every 15m".
After downtime, --catch-up skip (the default) fires only the latest missed
slot; fire orders up to --catch-up-limit missed slots as well. Flags:

`

func runSchedules(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("schedules", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nf natsFlags
	nf.register(fs)
	out := outputFlag(fs)
	var d recurring.Definition
	var start, end string
	fs.StringVar(&d.ID, "id", "", "create: the schedule's id, [a-z0-9_-]")
	fs.StringVar(&d.Schedule, "schedule", "", "create: cron expression, descriptor or @every <duration>")
	fs.StringVar(&d.TimeZone, "time-zone", "UTC", "create: IANA time zone of a cron expression")
	fs.StringVar(&d.Query, "query", "", "create: search query")
	fs.StringVar(&d.Country, "country", "US", "create: two-letter country code")
	fs.StringVar(&d.Language, "language", "en", "create: two-letter language code")
	fs.StringVar(&d.Device, "device", "desktop", "create: desktop or mobile")
	fs.IntVar(&d.Limit, "limit", 0, "create: results per search, 1 to 100 (default 10)")
	fs.StringVar(&d.Account, "account", "", "create: API account")
	fs.StringVar(&d.Priority, "priority", "", "create: high or normal")
	fs.StringVar(&start, "start", "", "create: first possible slot, RFC 3339 (default: from now)")
	fs.StringVar(&end, "end", "", "create: no slot at or after this time, RFC 3339")
	fs.StringVar(&d.CatchUp.Policy, "catch-up", recurring.CatchUpSkip, "create: what to do with slots missed while no engine ran: skip or fire")
	fs.IntVar(&d.CatchUp.Limit, "catch-up-limit", 0, "create: with --catch-up fire, at most this many missed slots (default 10)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the engine")
	fs.Usage = func() { fmt.Fprint(fs.Output(), schedulesUsage); fs.PrintDefaults() }
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: schedules: %v", errUsage, err)
	}
	if err := out.check(); err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("%w: schedules needs an operation: create, list, show, pause, resume or delete", errUsage)
	}
	op, rest := pos[0], pos[1:]
	var payload []byte
	switch op {
	case "create":
		if len(rest) > 0 {
			return fmt.Errorf("%w: schedules create takes flags, not %q", errUsage, rest)
		}
		for _, f := range []struct {
			flag, value string
			t           *time.Time
		}{{"--start", start, &d.Start}, {"--end", end, &d.End}} {
			if f.value == "" {
				continue
			}
			if *f.t, err = time.Parse(time.RFC3339, f.value); err != nil {
				return fmt.Errorf("%w: %s %q is not an RFC 3339 time", errUsage, f.flag, f.value)
			}
		}
		payload, _ = json.Marshal(d)
	case "list":
	case "show", "pause", "resume", "delete":
		if len(rest) != 1 {
			return fmt.Errorf("%w: schedules %s needs exactly one schedule id", errUsage, op)
		}
		payload, _ = json.Marshal(engine.ScheduleRequest{ID: rest[0]})
	default:
		return fmt.Errorf("%w: unknown schedules operation %q", errUsage, op)
	}
	endpoint := op
	if op == "show" {
		endpoint = "get"
	}
	subject := service.Prefix + ".schedules." + endpoint
	nc, js, err := nf.connect(env, nil, "serpent schedules")
	if err != nil {
		return err
	}
	defer nc.Close()
	rctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if op == "list" {
		return listSchedules(rctx, nc, subject, out, stdout)
	}
	msg, err := askService(rctx, nc, "schedules "+op, subject, payload)
	if err != nil {
		return err
	}
	switch op {
	case "delete":
		fmt.Fprintf(stdout, "deleted %s\n", rest[0])
		return nil
	}
	var rec engine.Record
	if err := json.Unmarshal(msg.Data, &rec); err != nil {
		return err
	}
	// Each recent slot's job, as the status bucket shows it.
	type slotJob struct {
		Slot   time.Time `json:"slot"`
		JobID  string    `json:"job_id"`
		Status string    `json:"status"`
	}
	var jobs []slotJob
	if op == "show" {
		for _, f := range rec.State.Recent {
			var v projections.JobView
			status := "unknown"
			if found, err := getValue(ctx, js, projections.StatusBucket, f.JobID, &v); err == nil && found {
				status = string(v.Status)
			}
			jobs = append(jobs, slotJob{Slot: f.Slot, JobID: f.JobID, Status: status})
		}
	}
	if out.json() {
		return printJSON(stdout, struct {
			engine.Record
			Jobs []slotJob `json:"jobs,omitempty"`
		}{rec, jobs})
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	def := rec.Definition
	fmt.Fprintf(tw, "schedule\t%s\t%s (%s)\n", def.ID, def.Schedule, def.TimeZone)
	fmt.Fprintf(tw, "search\t%s\t%s %s %s, %d results\n", def.Query, def.Country, def.Language, def.Device, def.Limit)
	fmt.Fprintf(tw, "state\t%s\tcatch-up %s %d; %d slots skipped\n", scheduleState(rec), def.CatchUp.Policy, def.CatchUp.Limit, rec.State.Skipped)
	fmt.Fprintf(tw, "slots\tlast %s\tnext %s\n", stamp(rec.State.LastSlot), stamp(rec.State.NextSlot))
	if len(jobs) > 0 {
		fmt.Fprintln(tw, "\nSLOT\tJOB\tSTATUS")
		for i := len(jobs) - 1; i >= 0; i-- {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", stamp(jobs[i].Slot), jobs[i].JobID, jobs[i].Status)
		}
	}
	return tw.Flush()
}

func scheduleState(r engine.Record) string {
	switch {
	case r.Creating:
		return "creating" // stored, its create not finished: it does not fire
	case r.State.Paused:
		return "paused"
	case r.State.NextSlot.IsZero():
		return "ended"
	}
	return "active"
}

// listPage is how many schedules `serpent schedules list` asks for at a
// time: a list of every schedule at once outgrows a NATS message at a few
// hundred. The engine answers fewer when they would not fit; the list
// ends with an empty page.
const listPage = 100

// listSchedules pages through every schedule and prints them.
func listSchedules(ctx context.Context, nc *natsgo.Conn, subject string, out output, stdout io.Writer) error {
	recs := []engine.Record{} // none prints [], as status and ledger do
	for after := ""; ; {
		req, _ := json.Marshal(engine.ListRequest{After: after, Limit: listPage})
		msg, err := askService(ctx, nc, "schedules list", subject, req)
		if err != nil {
			return err
		}
		var page []engine.Record
		if err := json.Unmarshal(msg.Data, &page); err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		if after != "" && page[0].Definition.ID <= after {
			// An engine of an earlier version answers every schedule,
			// whatever it is asked: this answer is the whole list.
			recs = page
			break
		}
		recs = append(recs, page...)
		after = page[len(page)-1].Definition.ID
	}
	if out.json() {
		return printJSON(stdout, recs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSCHEDULE\tTIME ZONE\tQUERY\tSTATE\tLAST SLOT\tNEXT SLOT")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Definition.ID, r.Definition.Schedule, r.Definition.TimeZone,
			r.Definition.Query, scheduleState(r), stamp(r.State.LastSlot), stamp(r.State.NextSlot))
	}
	return tw.Flush()
}
