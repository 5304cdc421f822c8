package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/user"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/serpent-engine/serpent/worker"
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
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: serpent %s JOB_ID [flags]\n\nAsks a running engine (the %q micro service) to %s the job. Flags:\n\n", op, worker.ServiceName, op)
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
	req, _ := json.Marshal(worker.JobRequest{JobID: jobID, By: *by, Reason: *reason})
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, worker.ServicePrefix+"."+op, req)
	if err != nil {
		return fmt.Errorf("%s: no answer from the serpent engine on %s.%s: %w (is serpent run up?)", op, worker.ServicePrefix, op, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		why := msg.Header.Get(micro.ErrorHeader)
		var body worker.ServiceError
		if json.Unmarshal(msg.Data, &body) == nil && body.Error != "" {
			why = body.Error // the reason itself, not only its class
		}
		return &exitError{code: 1, err: fmt.Errorf("%s %s: %s (%s)", op, jobID, why, code)}
	}
	var view struct {
		JobID  string `json:"job_id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(msg.Data, &view); err != nil {
		return fmt.Errorf("%s: unreadable answer: %w", op, err)
	}
	fmt.Fprintf(stdout, "%s %s\n", view.JobID, view.Status)
	return nil
}
