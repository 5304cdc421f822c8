package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/serpent-engine/serpent/projections"
)

func init() {
	register(command{name: "observation", summary: "show a job's bought search result, from the serp_observations bucket", run: runObservation})
}

func runObservation(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("observation", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nf natsFlags
	nf.register(fs)
	out := outputFlag(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: serpent observation JOB_ID [flags]

Shows the search result serpent bought for a job, from the
serp_observations bucket: with -o json, the whole result as the API
returned it. Flags:

`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: observation: %v", errUsage, err)
	}
	if err := out.check(); err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: observation needs exactly one job id", errUsage)
	}
	nc, js, err := nf.connect(env, nil, "serpent observation")
	if err != nil {
		return err
	}
	defer nc.Close()
	var o projections.Observation
	found, err := getValue(ctx, js, projections.ObservationsBucket, pos[0], &o)
	if err != nil {
		return err
	}
	if !found {
		lagNote(ctx, js, stderr)
		return &exitError{code: 1, err: fmt.Errorf("no observation for job %s (serpent status %s says where it stands)", pos[0], pos[0])}
	}
	if out.json() {
		return printJSON(stdout, o)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "job\t%s\n", o.JobID)
	fmt.Fprintf(tw, "stored\t%s (version %d)\n", stamp(o.StoredAt), o.Version)
	fmt.Fprintf(tw, "request\t%s, key %s\n", o.RequestID, o.Key)
	fmt.Fprintf(tw, "replayed\t%t\n", o.Replayed)
	fmt.Fprintf(tw, "pages\t%d\n", o.Pages)
	if err := tw.Flush(); err != nil {
		return err
	}
	// The organic results, when the result has the API's usual shape.
	var res struct {
		Organic []struct {
			Position int    `json:"position"`
			Title    string `json:"title"`
			Link     string `json:"link"`
		} `json:"organic"`
	}
	if json.Unmarshal(o.Result, &res) != nil || len(res.Organic) == 0 {
		fmt.Fprintf(stdout, "\n%d bytes of result (-o json shows it)\n", len(o.Result))
		return nil
	}
	fmt.Fprintln(stdout)
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tTITLE\tLINK")
	for _, r := range res.Organic {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", r.Position, r.Title, r.Link)
	}
	return tw.Flush()
}
