package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

func init() {
	register(command{name: "audit", summary: "replay every event and check serpent's promises (and the provider's billing ledger)", run: runAudit})
}

type auditFlags struct {
	nats       natsFlags
	out        output
	eventsFile string
	ledgerURL  string
	ledgerFile string
	tokenFile  string
	now        string
	stuckAfter time.Duration
	progress   *string
}

func runAudit(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f auditFlags
	f.nats.register(fs)
	f.out = outputFlag(fs)
	fs.StringVar(&f.eventsFile, "events", "", "audit a recorded log instead: a file of the log's message bodies, one JSON per line (an event, or an array of the events of one append), in log order")
	fs.StringVar(&f.ledgerURL, "ledger", "", "join the provider's billing ledger at this API base URL (token from "+serper.TokenEnv+" or --token-file)")
	fs.StringVar(&f.ledgerFile, "ledger-file", "", "join a billing ledger export instead: {\"entries\":[...]} as GET /v1/billing/ledger answers (the sandbox exports every charge of a day with ?day=YYYY-MM-DD)")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the API token for --ledger")
	fs.StringVar(&f.now, "now", "", "judge pending jobs and commands at this RFC 3339 time (default: now)")
	fs.DurationVar(&f.stuckAfter, "stuck-after", audit.DefaultStuckAfter, "how long a job may be overdue, or a command wait for its consumer, before it counts as stuck")
	f.progress = progressFlag(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: serpent audit [flags]

Replays every event of SERP_EVENTS, folds every job and checks the promises:
gapless versions, keys persisted before use, one body per job, no resend
past a key's deadline, a new key only after a definite outcome, an outcome
only of a key's latest send, at most one purchase per job unless
deliberately re-bought, every job finished or legitimately pending, and
every command a job or a recorded rejection.
With --ledger it joins the provider's billing ledger by key and request id:
one charge per accepted first execution, every charge explained.

Exits 1 when a promise is broken. Reading only: safe to run at any time,
and twice. Flags:

`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: audit: %v", errUsage, err)
	}
	if err := f.out.check(); err != nil {
		return err
	}
	if f.ledgerURL != "" && f.ledgerFile != "" {
		return fmt.Errorf("%w: audit takes --ledger or --ledger-file, not both", errUsage)
	}
	opts := audit.Options{Now: time.Now(), StuckAfter: f.stuckAfter, WithoutLedger: f.ledgerURL == "" && f.ledgerFile == ""}
	if f.now != "" {
		t, err := time.Parse(time.RFC3339Nano, f.now)
		if err != nil {
			return fmt.Errorf("%w: --now %q is not an RFC 3339 time", errUsage, f.now)
		}
		opts.Now = t
	}
	var ledger func(context.Context, []string, []string, func(string, uint64, uint64)) ([]events.LedgerEntry, error)
	switch {
	case f.ledgerFile != "":
		entries, err := readLedgerFile(f.ledgerFile)
		if err != nil {
			return err
		}
		ledger = func(context.Context, []string, []string, func(string, uint64, uint64)) ([]events.LedgerEntry, error) {
			return entries, nil
		}
	case f.ledgerURL != "":
		client, err := f.ledgerClient(env, stderr)
		if err != nil {
			return err
		}
		defer client.CloseIdleConnections()
		ledger = func(ctx context.Context, keys, ids []string, progress func(string, uint64, uint64)) ([]events.LedgerEntry, error) {
			return lookUpLedger(ctx, client, keys, ids, progress)
		}
	}

	defer audit.TuneGC()()
	bar := newProgress(stderr, *f.progress)
	defer bar.done()
	a, err := f.auditLog(ctx, env, opts, bar)
	if err != nil {
		return err
	}
	if ledger != nil {
		keys, ids := a.Lookups()
		entries, err := ledger(ctx, keys, ids, bar.update)
		if err != nil {
			return fmt.Errorf("audit: billing ledger: %w", err)
		}
		a.Ledger(entries)
	}
	bar.done()
	rep := a.Report()
	if f.out.json() {
		if err := printJSON(stdout, rep); err != nil {
			return err
		}
	} else if err := printReport(stdout, rep); err != nil {
		return err
	}
	if !rep.OK() {
		return &exitError{code: 1, err: fmt.Errorf("audit: %d broken promise(s)", len(rep.Violations))}
	}
	return nil
}

// auditLog audits the recorded file, or the live log with its commands.
func (f *auditFlags) auditLog(ctx context.Context, env func(string) string, opts audit.Options, bar *progress) (*audit.Auditor, error) {
	if f.eventsFile != "" {
		rec, err := readEventsFile(f.eventsFile)
		if err != nil {
			return nil, err
		}
		return audit.CheckLog(ctx, snats.RecordedAuditLog(rec, 0), opts)
	}
	nc, js, err := f.nats.connect(env, nil, "serpent audit")
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	// What the intake, and the serpent-strays consumer, had settled is
	// read before the log and the rejections, so the jobs or rejections
	// of those commands are in what follows.
	intake, _, err := commandConsumer(ctx, js, snats.IntakeConsumer)
	if err != nil {
		return nil, err
	}
	strays, _, err := commandConsumer(ctx, js, snats.StrayConsumer)
	if err != nil {
		return nil, err
	}
	log, err := snats.NewArchivedAuditLog(ctx, js, 0, func(done, total uint64) { bar.update("events", done, total) })
	if err != nil {
		return nil, err
	}
	a, err := audit.CheckLog(ctx, log, opts)
	if err != nil {
		return nil, err
	}
	// A missing intake consumer settled nothing: the commands are still
	// checked (as unread) whenever the command stream exists.
	if err := checkCommands(ctx, js, a, intake, strays, bar); err != nil {
		return nil, err
	}
	return a, nil
}

// commandConsumer is what a consumer on the commands had settled: its
// acknowledgement floor, its last delivery and how many of its deliveries
// were unacknowledged. JetStream does not list which ones; audit.Commands
// counts them. ok is false when the consumer does not exist (for the
// intake: there are no commands to check).
func commandConsumer(ctx context.Context, js jetstream.JetStream, name string) (audit.Consumer, bool, error) {
	c, err := js.Consumer(ctx, snats.CommandStream, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) {
		return audit.Consumer{}, false, nil
	}
	if err != nil {
		return audit.Consumer{}, false, fmt.Errorf("audit: consumer %s: %w", name, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return audit.Consumer{}, false, fmt.Errorf("audit: consumer %s: %w", name, err)
	}
	return audit.Consumer{Floor: info.AckFloor.Stream, Delivered: info.Delivered.Stream, Outstanding: info.NumAckPending}, true, nil
}

// checkCommands reads every rejection and every command, and checks each
// became a job or a rejection; an operation on recurring schedules is
// counted, as rejected or not.
func checkCommands(ctx context.Context, js jetstream.JetStream, a *audit.Auditor, intake, strays audit.Consumer, bar *progress) error {
	rejected := map[uint64]string{} // command sequence: the rejection's reason
	_, err := snats.NewLog(js, snats.RejectStream, snats.RejectSubjectPrefix+">").Read(ctx, 1, 0, 1024, func(msgs []snats.Message) error {
		for _, m := range msgs {
			if seq, err := strconv.ParseUint(m.Header.Get(snats.HeaderCommandSeq), 10, 64); err == nil {
				reason := m.Header.Get(snats.HeaderRejectReason)
				if reason == "" {
					reason = strings.TrimPrefix(m.Subject, snats.RejectSubjectPrefix)
				}
				rejected[seq] = reason
			}
		}
		return nil
	})
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("audit: rejections: %w", err)
	}
	// Commands on subjects nothing reads are the serpent-strays
	// consumer's to reject (none before an engine made it).
	var cmds []audit.Command
	_, err = snats.NewLog(js, snats.CommandStream, snats.CommandSubjects).Read(ctx, 1, 0, 1024, func(msgs []snats.Message) error {
		for _, m := range msgs {
			if strings.HasPrefix(m.Subject, snats.ScheduleOpPrefix) {
				// Schedule operations change schedules, not jobs: they
				// are counted, and matched to their rejections.
				cmds = append(cmds, audit.Command{Seq: m.Seq, ScheduleOp: true, At: m.Time})
				continue
			}
			c := parseCommand(m.Seq, m.Subject, m.Data)
			c.Stray = m.Subject != snats.ScheduleSubject
			c.Source = fmt.Sprintf("%s:%d", snats.CommandStream, m.Seq) // as the intake names it
			c.At = m.Time
			cmds = append(cmds, c)
		}
		bar.update("commands", uint64(len(cmds)), 0)
		return nil
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil // no command stream: no commands to check
	}
	if err != nil {
		return fmt.Errorf("audit: commands: %w", err)
	}
	a.Commands(cmds, rejected, intake, strays)
	return nil
}

// parseCommand maps a command to its job as the intake does.
func parseCommand(seq uint64, subject string, data []byte) audit.Command {
	if subject != snats.ScheduleSubject {
		return audit.Command{Seq: seq, Invalid: "nothing reads " + subject}
	}
	c, err := engine.ParseCommand(data)
	if err == nil {
		var s aggregate.Schedule
		if s, err = aggregate.NewSchedule(c, aggregate.DefaultPolicy(), ""); err == nil {
			return audit.Command{Seq: seq, JobID: s.JobID}
		}
		return audit.Command{Seq: seq, Invalid: err.Error()}
	}
	return audit.Command{Seq: seq, Invalid: err.Error()}
}

// readEventsFile reads a recorded log: one message body per line (an
// encoded event, or a group of them).
func readEventsFile(path string) ([]snats.Message, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --events: %v", errUsage, err)
	}
	defer f.Close()
	var msgs []snats.Message
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
	for line := uint64(1); sc.Scan(); line++ {
		if b := bytes.TrimSpace(sc.Bytes()); len(b) > 0 {
			msgs = append(msgs, snats.Message{Seq: line, Data: slices.Clone(b)})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--events %s: %w", path, err)
	}
	return msgs, nil
}

// readLedgerFile reads a billing ledger export in the API's format.
func readLedgerFile(path string) ([]events.LedgerEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --ledger-file: %v", errUsage, err)
	}
	var export struct {
		Entries *[]serper.LedgerEntry `json:"entries"`
	}
	if err := json.Unmarshal(b, &export); err != nil || export.Entries == nil {
		return nil, fmt.Errorf("%w: --ledger-file %s is not {\"entries\":[...]}", errUsage, path)
	}
	return ledgerEntries(*export.Entries), nil
}

func ledgerEntries(in []serper.LedgerEntry) []events.LedgerEntry {
	out := make([]events.LedgerEntry, len(in))
	for i, e := range in {
		out[i] = events.LedgerEntry{RequestID: e.RequestID, Key: e.IdempotencyKey, Pages: e.Pages,
			BilledPages: e.BilledPages, AmountMicros: e.AmountMicros, At: e.At}
	}
	return out
}

// ledgerClient is the API client for --ledger. Without a token, a sandbox
// on this machine is asked with the sandbox's public token.
func (f *auditFlags) ledgerClient(env func(string) string, stderr io.Writer) (*serper.Client, error) {
	token, err := serper.LoadToken(env, f.tokenFile)
	if errors.Is(err, serper.ErrNoToken) && isLoopbackURL(f.ledgerURL) {
		fmt.Fprintf(stderr, "audit: no %s; asking the sandbox at %s with its public token\n", serper.TokenEnv, f.ledgerURL)
		token, err = sandbox.DefaultToken, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: --ledger: %v", errUsage, err)
	}
	if token != sandbox.DefaultToken {
		if err := tokenTransport(f.ledgerURL); err != nil {
			return nil, fmt.Errorf("%w: --ledger: %v", errUsage, err)
		}
	}
	client, err := serper.New(serper.Config{BaseURL: f.ledgerURL, Token: token})
	if err != nil {
		return nil, fmt.Errorf("%w: --ledger: %v", errUsage, err)
	}
	return client, nil
}

func isLoopbackURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// lookUpLedger asks the ledger for every key and request id, a few
// hundred at a time, four requests at once.
func lookUpLedger(ctx context.Context, client *serper.Client, keys, ids []string, progress func(string, uint64, uint64)) ([]events.LedgerEntry, error) {
	const chunk = 500
	type query struct{ keys, ids []string }
	var queries []query
	for k := range slices.Chunk(keys, chunk) {
		queries = append(queries, query{keys: k})
	}
	for r := range slices.Chunk(ids, chunk) {
		queries = append(queries, query{ids: r})
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		out  []serper.LedgerEntry
		errs []error
		done uint64
		work = make(chan query)
	)
	total := uint64(len(keys) + len(ids))
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range work {
				entries, err := client.Ledger(ctx, serper.LedgerQuery{Keys: q.keys, RequestIDs: q.ids})
				mu.Lock()
				out = append(out, entries...)
				if err != nil {
					errs = append(errs, err)
				}
				done += uint64(len(q.keys) + len(q.ids))
				progress("ledger", done, total)
				mu.Unlock()
			}
		}()
	}
	for _, q := range queries {
		select {
		case work <- q:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return ledgerEntries(out), nil
}

// printReport prints an audit report for people.
func printReport(w io.Writer, r audit.Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "audit at\t%s\n", r.Now.Format(time.RFC3339))
	fmt.Fprintf(tw, "events\t%d\n", r.Events)
	var statuses []string
	for _, s := range aggregate.Statuses() {
		if n := r.Statuses[s]; n > 0 {
			statuses = append(statuses, fmt.Sprintf("%d %s", n, s))
		}
	}
	fmt.Fprintf(tw, "jobs\t%d: %s (%d legitimately pending)\n", r.Jobs, orDash(strings.Join(statuses, ", ")), r.Pending)
	fmt.Fprintf(tw, "purchases\t%d (%d re-purchases authorised)\n", r.Purchases, r.RepurchasesAuthorized)
	if r.DoubleCharges > 0 {
		fmt.Fprintf(tw, "double charges\t%d made by the API under one key, found live, in %d jobs: %s\n",
			r.DoubleCharges, len(r.DoubleChargedJobs), strings.Join(r.DoubleChargedJobs, ", "))
	}
	if c := r.Commands; c != nil {
		fmt.Fprintf(tw, "commands\t%d: %d became jobs, %d rejected, %d schedule operations, %d pending at the intake, %d stuck, %d lost\n",
			c.Commands, c.Jobs, c.Rejected, c.ScheduleOps, c.Pending, c.Stuck, c.Lost)
	}
	if l := r.Ledger; l != nil {
		fmt.Fprintf(tw, "billing ledger\t%d charges: %d observations, %d found by reconciliation, %d double charges of the API found live, %d in flight, %d on cancelled jobs, %d unexplained; %d billed pages, %s\n",
			l.Charges, l.Observations, l.Reconciled, l.DoubleCharged, l.InFlight, l.Cancelled, l.Unexplained, l.BilledPages, dollars(l.AmountMicros))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.OK() {
		_, err := fmt.Fprintln(w, "\nevery promise kept")
		return err
	}
	fmt.Fprintf(w, "\n%d broken promise(s):\n", len(r.Violations))
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RULE\tJOB\tVERSION\tSEQ\tDETAIL")
	for _, v := range r.Violations {
		version, seq := "-", "-"
		if v.Version > 0 {
			version = strconv.FormatUint(v.Version, 10)
		}
		if v.Seq > 0 {
			seq = strconv.FormatUint(v.Seq, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", v.Rule, orDash(v.JobID), version, seq, v.Detail)
	}
	return tw.Flush()
}
