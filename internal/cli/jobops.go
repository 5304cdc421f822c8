package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/user"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/nats/service"
)

func init() {
	register(command{name: "cancel", summary: "cancel a job that is not finished", run: func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
		return runJobOp(ctx, "cancel", args, env, stdout, stderr)
	}})
	register(command{name: "repurchase", summary: "authorise buying a charged_no_result job again (recorded as deliberate)", run: func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
		return runJobOp(ctx, "repurchase", args, env, stdout, stderr)
	}})
}

// runJobOp asks a running engine, through the serpent micro service, to
// cancel a job or to buy it again.
func runJobOp(ctx context.Context, op string, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(op, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nf natsFlags
	nf.register(fs)
	by := fs.String("by", "", "who acts (default: the local user name)")
	reason := fs.String("reason", "", "why (required for repurchase)")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the engine")
	seen := -1
	if op == "repurchase" {
		fs.IntVar(&seen, "repurchases", -1, "the re-purchases the job's status showed when you decided (default: asked of the engine first); a repeat with the same number buys nothing more")
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: serpent %s JOB_ID [flags]\n\nAsks a running engine (the %q micro service) to %s the job. Flags:\n\n", op, service.Name, op)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %s: %v", errUsage, op, err)
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: %s needs exactly one job id", errUsage, op)
	}
	jobID := pos[0]
	if *by == "" {
		if u, err := user.Current(); err == nil {
			*by = u.Username
		}
	}
	nc, _, err := nf.connect(env, nil, "serpent "+op)
	if err != nil {
		return err
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	jr := engine.JobRequest{JobID: jobID, By: *by, Reason: *reason}
	if op != "repurchase" {
		view, err := askEngine(ctx, nc, op, jobID, jr)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s %s\n", view.JobID, view.Status)
		return nil
	}
	// A re-purchase names the count of re-purchases it was decided on, so
	// asking again after a lost answer cannot buy twice. The status says
	// the count, and whether the engine honours it (an earlier engine
	// ignores it: then the request is sent once).
	status, err := askEngine(ctx, nc, "status", jobID, engine.JobRequest{JobID: jobID})
	if err != nil {
		return err
	}
	if seen < 0 {
		seen = status.Repurchases
	}
	jr.Repurchases = &seen
	for {
		try, stop := context.WithTimeout(ctx, max(*timeout/4, time.Second))
		if !status.countHonoured {
			try, stop = context.WithCancel(ctx)
		}
		view, err := askEngine(try, nc, op, jobID, jr)
		stop()
		var exit *exitError
		switch {
		case err == nil && view.Repurchases > seen+1:
			fmt.Fprintf(stdout, "%s %s\n", view.JobID, view.Status)
			fmt.Fprintf(stderr, "nothing authorised: the job has had %d re-purchases, more than the %d this decision was taken on\n", view.Repurchases, seen)
			return nil
		case err == nil:
			fmt.Fprintf(stdout, "%s %s\n", view.JobID, view.Status)
			return nil
		case errors.As(err, &exit) || errors.Is(err, natsgo.ErrNoResponders) || ctx.Err() != nil || !status.countHonoured:
			if exit == nil {
				err = fmt.Errorf("%w; it may have been authorised: `serpent status %s` shows it, and `serpent repurchase %s --repurchases %d` asks again without buying twice", err, jobID, jobID, seen)
			}
			return err
		}
		// No answer in time: the same request again is safe.
	}
}

// jobView is what the CLI reads of a job's status.
type jobView struct {
	JobID       string `json:"job_id"`
	Status      string `json:"status"`
	Repurchases int    `json:"repurchases"`
	// countHonoured: the engine that answered honours a repurchase
	// request's count (service.HeaderRepurchaseCount).
	countHonoured bool
}

// askEngine sends one request to the serpent micro service. An error
// answer is an *exitError; no answer is a plain error.
func askEngine(ctx context.Context, nc *natsgo.Conn, op, jobID string, jr engine.JobRequest) (jobView, error) {
	var view jobView
	req, _ := json.Marshal(jr)
	msg, err := askService(ctx, nc, op+" "+jobID, service.Prefix+"."+op, req)
	if err != nil {
		return view, err
	}
	if err := json.Unmarshal(msg.Data, &view); err != nil {
		return view, fmt.Errorf("%s: unreadable answer: %w", op, err)
	}
	view.countHonoured = msg.Header.Get(service.HeaderRepurchaseCount) != ""
	return view, nil
}
