package cli

import (
	"cmp"
	"container/heap"
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

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

func init() {
	register(command{name: "status", summary: "show a job's status, or list jobs (by state), from the serp_status bucket", run: runStatus})
}

// statusOut is a job's status as serpent status -o json prints it: the
// view and the log sequence it reflects, without the runner's fold.
type statusOut struct {
	projections.JobView
	Seq uint64 `json:"seq"`
	// Archived: the job left the live log; its status is folded from
	// SERP_ARCHIVE.
	Archived bool `json:"archived,omitempty"`
}

// archivedStatus folds a job's status from the archive, as the
// projection would; found is false when the archive does not have it.
func archivedStatus(ctx context.Context, js jetstream.JetStream, jobID string) (projections.StatusValue, bool, error) {
	var v projections.StatusValue
	if err := events.ValidateJobID(jobID); err != nil {
		return v, false, nil
	}
	if ok, err := snats.HasArchive(ctx, js); err != nil || !ok {
		return v, false, err
	}
	msgs, err := snats.ArchivedJob(ctx, js, jobID)
	if err != nil {
		return v, false, fmt.Errorf("archive: %w", err)
	}
	var recs []projections.Record
	for _, m := range msgs {
		got, err := snats.DecodeEvents(snats.EventSubjectPrefix, m, false)
		if err != nil {
			return v, false, err
		}
		recs = append(recs, got...)
	}
	if len(recs) == 0 {
		return v, false, nil
	}
	b, _, err := projections.New(projections.Config{}).Fold(projections.StatusTarget(jobID), nil, recs)
	if err != nil {
		return v, false, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, false, err
	}
	return v, true, nil
}

func runStatus(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var nf natsFlags
	nf.register(fs)
	out := outputFlag(fs)
	state := fs.String("state", "", "list only jobs in this state ("+statusNames()+")")
	limit := fs.Int("limit", defaultStatusLimit, "list at most this many jobs, the newest (0: every one)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: serpent status [JOB_ID] [--state S] [--limit N] [flags]

Shows one job's status, or lists the newest jobs (only those in state S
with --state), as the serp_status bucket holds them. Flags:

`)
		fs.PrintDefaults()
	}
	pos, err := parseArgs(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: status: %v", errUsage, err)
	}
	if err := out.check(); err != nil {
		return err
	}
	limited := false
	fs.Visit(func(fl *flag.Flag) { limited = limited || fl.Name == "limit" })
	if len(pos) > 1 || len(pos) == 1 && (*state != "" || limited) {
		return fmt.Errorf("%w: status takes one job id, or --state and --limit, or nothing", errUsage)
	}
	if *limit < 0 {
		return fmt.Errorf("%w: --limit %d: use 0 for every job, or a positive number", errUsage, *limit)
	}
	if *state != "" && !slices.Contains(aggregate.Statuses(), aggregate.Status(*state)) {
		return fmt.Errorf("%w: --state %q: use one of %s", errUsage, *state, statusNames())
	}
	nc, js, err := nf.connect(env, nil, "serpent status")
	if err != nil {
		return err
	}
	defer nc.Close()
	lagNote(ctx, js, stderr)

	if len(pos) == 1 {
		var v projections.StatusValue
		found, err := getValue(ctx, js, projections.StatusBucket, pos[0], &v)
		if err != nil {
			return err
		}
		archived := false
		if !found {
			// A job that left the live log is in the archive.
			if v, found, err = archivedStatus(ctx, js, pos[0]); err != nil {
				return err
			}
			archived = found
		}
		if !found {
			return &exitError{code: 1, err: fmt.Errorf("no job %s in %s or in the archive", pos[0], projections.StatusBucket)}
		}
		if out.json() {
			return printJSON(stdout, statusOut{v.JobView, v.Seq, archived})
		}
		if archived {
			fmt.Fprintf(stdout, "archived: job %s left the live log; this is its history in %s\n", pos[0], snats.ArchiveStream)
		}
		return printJob(stdout, v.JobView)
	}

	newest := newNewestJobs(*limit)
	err = eachValue(ctx, js, projections.StatusBucket, "", func(key string, value []byte) error {
		var v projections.StatusValue
		if err := json.Unmarshal(value, &v); err != nil {
			return fmt.Errorf("%s/%s is not a value serpent wrote: %w", projections.StatusBucket, key, err)
		}
		if *state == "" || string(v.Status) == *state {
			newest.add(statusOut{JobView: v.JobView, Seq: v.Seq})
		}
		return nil
	})
	if err != nil {
		return err
	}
	jobs := newest.sorted()
	if out.json() {
		if len(jobs) < newest.seen {
			fmt.Fprintf(stderr, "serpent status: the newest %d of %d jobs (--limit 0 lists every one)\n", len(jobs), newest.seen)
		}
		if jobs == nil {
			jobs = []statusOut{}
		}
		return printJSON(stdout, jobs)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATUS\tATTEMPT\tSENDS\tNEXT RUN\tUPDATED\tLAST OUTCOME")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", j.JobID, j.Status, j.Attempt, j.Sends, stampPtr(j.NextRunAt),
			stamp(j.Updated), lastOutcome(j.JobView))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(jobs) < newest.seen {
		fmt.Fprintf(stdout, "%d of %d jobs, the newest (--limit 0 lists every one)\n", len(jobs), newest.seen)
	} else {
		fmt.Fprintf(stdout, "%d jobs\n", len(jobs))
	}
	return nil
}

// defaultStatusLimit is how many jobs serpent status lists unless told:
// a bucket of millions of jobs is not read into memory to be printed.
const defaultStatusLimit = 1000

// newestJobs keeps the newest jobs of those it is given, at most limit of
// them (every one for 0), in memory that follows limit rather than the
// jobs given: the oldest kept is dropped when a newer one comes. A job
// given again while it is kept (a bucket read while the job moved on can
// give it again, newer) is kept once, as of its latest event, and counted
// once; one given again after it was dropped, or not kept, is counted
// again (seen is then a little more than the jobs there are).
type newestJobs struct {
	limit int
	seen  int
	jobs  []statusOut // a heap, the oldest first, once limit is reached
	at    map[string]int
}

func newNewestJobs(limit int) *newestJobs {
	return &newestJobs{limit: limit, at: map[string]int{}}
}

// newerJob orders jobs newest first (and by id among jobs updated at the
// same time).
func newerJob(a, b statusOut) int {
	return cmp.Or(b.Updated.Compare(a.Updated), cmp.Compare(a.JobID, b.JobID))
}

func (n *newestJobs) add(j statusOut) {
	h := oldestFirst{n}
	if i, kept := n.at[j.JobID]; kept {
		if j.Seq > n.jobs[i].Seq {
			n.jobs[i] = j
			if n.full() {
				heap.Fix(h, i)
			}
		}
		return
	}
	n.seen++
	if !n.full() {
		n.at[j.JobID] = len(n.jobs)
		n.jobs = append(n.jobs, j)
		if n.full() {
			heap.Init(h)
		}
		return
	}
	if newerJob(j, n.jobs[0]) < 0 { // newer than the oldest kept
		delete(n.at, n.jobs[0].JobID)
		n.jobs[0] = j
		n.at[j.JobID] = 0
		heap.Fix(h, 0)
	}
}

// full reports whether limit jobs are kept.
func (n *newestJobs) full() bool { return n.limit > 0 && len(n.jobs) >= n.limit }

// sorted returns the jobs kept, newest first.
func (n *newestJobs) sorted() []statusOut {
	slices.SortFunc(n.jobs, newerJob)
	n.at = nil
	return n.jobs
}

// oldestFirst is a heap of jobs whose top is the oldest, keeping each
// job's place in at.
type oldestFirst struct{ n *newestJobs }

func (h oldestFirst) Len() int           { return len(h.n.jobs) }
func (h oldestFirst) Less(i, j int) bool { return newerJob(h.n.jobs[i], h.n.jobs[j]) > 0 }
func (h oldestFirst) Swap(i, j int) {
	jobs := h.n.jobs
	jobs[i], jobs[j] = jobs[j], jobs[i]
	h.n.at[jobs[i].JobID], h.n.at[jobs[j].JobID] = i, j
}
func (h oldestFirst) Push(x any) { panic("oldestFirst: the heap keeps its size") }
func (h oldestFirst) Pop() any   { panic("oldestFirst: the heap keeps its size") }

func printJob(w io.Writer, v projections.JobView) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	row("job", "%s", v.JobID)
	row("status", "%s", v.Status)
	row("search", "%q %s/%s %s, %d results", v.Search.Query, v.Search.Country, v.Search.Language, v.Search.Device, v.Search.Limit)
	row("slot", "%s", stamp(v.Slot))
	row("scheduled", "%s", stamp(v.Scheduled))
	row("updated", "%s (version %d)", stamp(v.Updated), v.Version)
	row("next run", "%s", stampPtr(v.NextRunAt))
	row("attempt", "%d of key %s", v.Attempt, orDash(v.CurrentKey))
	row("sends", "%d", v.Sends)
	row("last outcome", "%s", lastOutcome(v))
	row("request ids", "%s", orDash(strings.Join(v.RequestIDs, ", ")))
	if v.Reconcile != "" {
		row("reconciling", "%s", v.Reconcile)
	}
	if r := v.Result; r != nil {
		row("result", "%d pages, request %s, key %s, replayed %t", r.Pages, r.RequestID, r.Key, r.Replayed)
	}
	if c := v.ChargeCheck; c != nil {
		row("charges", "%s", chargeCheckText(c))
	}
	if f := v.Failure; f != nil {
		row("failure", "%s %d %s: %s", f.Reason, f.Status, f.Code, f.Message)
	}
	if c := v.Cancelled; c != nil {
		row("cancelled", "by %s: %s", c.By, c.Reason)
	}
	if v.Repurchases > 0 {
		row("re-purchases", "%d authorised", v.Repurchases)
	}
	for _, a := range v.Attempts {
		row(fmt.Sprintf("key %d", a.Number), "%s (%s) tries %d, first sent %s, deadline %s, %s", a.Key, a.Reason, a.Tries,
			stampPtr(a.FirstSend), stampPtr(a.Deadline), orDash(a.LastClass))
	}
	return tw.Flush()
}

// chargeCheckText says what the check of a stored key's charges found.
func chargeCheckText(c *projections.ChargeCheckView) string {
	switch {
	case c.Pending:
		return "to be checked in the billing ledger once the key's searches have ended (the key was sent more than once)"
	case c.Verdict == aggregate.VerdictDoubleCharge:
		return fmt.Sprintf("DOUBLE CHARGE: the API charged the key %d times (requests %s)", c.Charges, strings.Join(c.RequestIDs, ", "))
	}
	return fmt.Sprintf("%s in the billing ledger (%d %s)", c.Verdict, c.Charges, plural(c.Charges, "charge", "charges"))
}

// lastOutcome says in a few words how the job's last send ended.
func lastOutcome(v projections.JobView) string {
	switch {
	case v.Result != nil:
		s := fmt.Sprintf("200, stored (%d pages)", v.Result.Pages)
		if v.Result.Replayed {
			s += " (replayed)"
		}
		switch c := v.ChargeCheck; {
		case c == nil:
		case c.Pending:
			s += ", charges to check"
		case c.Verdict == aggregate.VerdictDoubleCharge:
			s += fmt.Sprintf(", DOUBLE CHARGE by the API (%d charges)", c.Charges)
		}
		return s
	case v.Failure != nil:
		return fmt.Sprintf("failed: %s %s", v.Failure.Reason, v.Failure.Code)
	case v.Cancelled != nil:
		return "cancelled by " + v.Cancelled.By
	}
	o := v.LastOutcome
	if o == nil {
		return "-"
	}
	if o.Status == 0 {
		return "unknown (" + o.Unknown + ") → " + o.Action
	}
	s := fmt.Sprintf("%d", o.Status)
	if o.Code != "" {
		s += " " + o.Code
	}
	if o.Replayed {
		s += " (replayed)"
	}
	return s + " → " + o.Action
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func stampPtr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(*t)
}

func statusNames() string {
	var names []string
	for _, s := range aggregate.Statuses() {
		names = append(names, string(s))
	}
	return strings.Join(names, ", ")
}
