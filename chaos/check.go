package chaos

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// World is what a run left behind, as the checks read it once every job
// is finished: serpent's streams and the provider's books.
type World struct {
	NATSURL    string
	SandboxURL string
	// Token is the sandbox's bearer token, a secret of the run.
	Token  string
	Binary string
	Dir    string
	JS     jetstream.JetStream
	// Histories are the jobs' logs, read from SERP_EVENTS.
	Histories map[string][]events.Event
	// Log is SERP_EVENTS in order, with stream sequences.
	Log []projections.Record
	// Stats are the sandbox's counters and books.
	Stats sandbox.Stats
}

// Check is one more check of a finished run, for what other parts of
// serpent build (projections, audit): it reads the world and reports what
// it found. Checks run in order after the built-in ones.
type Check interface {
	Name() string
	Check(ctx context.Context, w *World) CheckResult
}

// CheckResult is what one Check found.
type CheckResult struct {
	Name string `json:"name"`
	// Skipped says why the check did not apply, if it did not.
	Skipped string `json:"skipped,omitempty"`
	// Summary is one line on what was checked.
	Summary string `json:"summary,omitempty"`
	// Violations are broken promises.
	Violations []string `json:"violations,omitempty"`
}

// check reads the world and holds it to serpent's promises (docs/reliability.md).
func (r *run) check(ctx context.Context, checks []Check) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rep := r.rep
	w := &World{NATSURL: r.natsURL, SandboxURL: r.sbURL, Token: r.token, Binary: r.bin, Dir: r.dir, JS: r.js, Histories: map[string][]events.Event{}}

	// The commands, the rejections and the log.
	var cmds []storedCommand
	err := readAll(ctx, r.js, snats.CommandStream, snats.CommandSubjects, func(m jetstream.Msg) error {
		meta, err := m.Metadata()
		if err != nil {
			return err
		}
		cmds = append(cmds, storedCommand{meta.Sequence.Stream, m.Headers().Get(natsgo.MsgIdHdr), m.Data()})
		return nil
	})
	if err != nil {
		return err
	}
	rejected := map[uint64]rejection{}
	err = readAll(ctx, r.js, snats.RejectStream, snats.RejectSubjectPrefix+">", func(m jetstream.Msg) error {
		seq, err := strconv.ParseUint(m.Headers().Get(snats.HeaderCommandSeq), 10, 64)
		if err != nil {
			rep.violation("a rejection record without a command sequence: %q", m.Headers().Get(snats.HeaderCommandSeq))
			return nil
		}
		if _, twice := rejected[seq]; twice {
			rep.violation("command %d was rejected twice", seq)
		}
		rejected[seq] = rejection{m.Headers().Get(snats.HeaderRejectReason), m.Data()}
		rep.Rejections[m.Headers().Get(snats.HeaderRejectReason)]++
		r.holdsToken("rejection of command "+strconv.FormatUint(seq, 10), m.Subject(), m.Headers(), m.Data())
		return nil
	})
	if err != nil {
		return err
	}
	// The whole log: the archive's copy and the live log's newer events,
	// so jobs that left the live log by their retention are checked too.
	err = snats.ReadHistory(ctx, r.js, func(msgs []snats.Message) error {
		for _, m := range msgs {
			job := strings.TrimPrefix(m.Subject, snats.EventSubjectPrefix)
			r.holdsToken("an event of job "+job, m.Subject, m.Header, m.Data)
			evs, err := events.DecodeAll(m.Data)
			if err != nil {
				rep.violation("job %s: unreadable event: %v", job, err)
				continue
			}
			w.Histories[job] = append(w.Histories[job], evs...)
			for _, ev := range evs {
				w.Log = append(w.Log, projections.Record{Seq: m.Seq, Event: ev})
			}
			rep.Events += len(evs)
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The books are read once no search runs at the sandbox: a search
	// still running when every job is finished (one an engine gave up on,
	// say) is charged when it ends, and a read before that misses it.
	quietFor := max(r.cfg.SearchTime, r.cfg.SlowSearchTime) + time.Minute
	stats := func(ctx context.Context) (sandbox.Stats, error) { return fetchStats(ctx, r.sbURL, r.token) }
	quiet := false
	if w.Stats, quiet, err = quietStats(ctx, stats, 100*time.Millisecond, quietFor); err != nil {
		return err
	}
	if !quiet {
		rep.violation("%d searches still ran at the sandbox %s after every job was finished: their charges may be missing from the checks",
			w.Stats.Running, quietFor)
	}

	// Promise 7 (and 1): every acknowledged command is in SERP_COMMANDS,
	// and each is the job or the rejection the run drew it as.
	want := checkCommands(rep, r.cmds, cmds, rejected, w.Histories, r.cfg.Retention > 0)

	// Promises 2 to 5, per job, from the log and the provider's books.
	keyJob := map[string]string{}
	deadlines := map[string]time.Time{}
	for job, evs := range w.Histories {
		if !want[job] {
			rep.violation("job %s is in the log but no command maps to it", job)
		}
		for _, v := range aggregate.Verify(evs) {
			rep.violation("%s", v)
		}
		s := aggregate.Fold(evs)
		rep.Final[string(s.Status)]++
		if !s.Finished() {
			rep.Lost++
			rep.violation("job %s is still %s, check of charges pending %t (promise 5)", job, s.Status, s.CheckPending)
		}
		rep.tally(evs)
		for _, a := range s.Attempts {
			keyJob[a.Key] = job
			if w.Stats.ChargesPerKey[a.Key] > 0 && !a.Deadline.IsZero() {
				deadlines[a.Key] = a.Deadline
			}
		}
		books := BooksOf(s, w.Stats.ChargesPerKey)
		found := aggregate.PurchasesOf(evs).Doubled
		rep.APIDoubleCharges += books.Doubled
		rep.APIDoublesFound += found
		chargedIDs := func() []string { return r.chargedIDs(ctx, s) }
		switch {
		case books.Keys > 1+s.Repurchases:
			rep.DuplicateCharges++
			rep.known(ClassifyCharge(evs, w.Stats.ChargesPerKey, chargedIDs),
				"job %s: %d of its keys were charged (promise 2)", job, books.Keys)
		case s.Finished() && books.Doubled != found:
			rep.violation("job %s: the API charged its keys %d times more than once, its log found %d (promise 9)", job, books.Doubled, found)
		case s.Finished() && books.Charges != Accounted(evs, s):
			rep.UnaccountedCharges++
			rep.known(ClassifyCharge(evs, w.Stats.ChargesPerKey, chargedIDs),
				"job %s is %s with %d charges, its log accounts for %d (promise 6)", job, s.Status, books.Charges, Accounted(evs, s))
		}
		if n := w.Stats.ChargesPerBody[s.BodySHA256]; n > 1 && books.Charges <= 1 {
			rep.violation("job %s: its body was charged %d times, under keys it never stored (promise 3)", job, n)
		}
	}
	for key, n := range w.Stats.ChargesPerKey {
		if keyJob[key] == "" {
			rep.OrphanCharges++
			rep.violation("key %s was charged %d times but no job stored it (promise 3)", key, n)
		}
	}
	r.checkLateExecutions(ctx, deadlines)
	r.logsHoldToken()
	if w.Stats.BodyViolations > 0 {
		rep.violation("%d requests carried another body under a known key (promise 3)", w.Stats.BodyViolations)
	}
	if r.cfg.Faults.EarlyExpiry == 0 && w.Stats.Forgotten > 0 {
		rep.violation("%d keys were sent again after the provider forgot them: past their window (promise 3)", w.Stats.Forgotten)
	}
	rep.Jobs = len(want)
	if v := observations(r.cmds, rep.Jobs); v != "" {
		rep.violation("%s", v)
	}
	rep.sandbox(w.Stats)

	for _, c := range checks {
		res := c.Check(ctx, w)
		res.Name = c.Name()
		rep.Checks = append(rep.Checks, res)
		for _, v := range res.Violations {
			rep.violation("%s: %s", c.Name(), v)
		}
		if res.Skipped != "" {
			r.say("check %s skipped: %s", c.Name(), res.Skipped)
		} else {
			r.say("check %s: %s", c.Name(), res.Summary)
		}
	}
	return nil
}

// storedCommand is a command as SERP_COMMANDS holds it.
type storedCommand struct {
	seq     uint64
	id      string // its publish's message id
	payload []byte
}

// rejection is a SERP_REJECTED record: the reason and the command's payload.
type rejection struct {
	reason  string
	payload []byte
}

// checkCommands holds every command SERP_COMMANDS holds to what the run
// drew it as (promises 7 and 1): one drawn valid became the job drawn for
// its observation (a duplicate spelling, the same job) and has no rejection
// record; one drawn malformed has exactly one, with the reason drawn for it
// and its payload byte for byte. The reason is the one the run drew, not
// one worked out with the engine's own rules (engine.ParseCommand,
// aggregate.NewSchedule), with which an engine that gave the wrong reason
// would agree. Every command in the stream is one the run published
// (nothing else publishes there during a run), so a command it did not
// draw is reported, not judged by the engine's rules either; and every
// command the run published must be in the stream, unless aged: then the
// retention horizon may have removed it, and only its job is checked. It
// returns the jobs the commands must have made.
func checkCommands(rep *Report, drawn []command, stored []storedCommand, rejected map[uint64]rejection,
	histories map[string][]events.Event, aged bool) (want map[string]bool) {
	want = map[string]bool{}
	ids := map[string]bool{}
	published := map[string]command{}
	for _, c := range drawn {
		published[c.id] = c
	}
	for _, c := range stored {
		ids[c.id] = true
		d, ours := published[c.id]
		rej, isRejected := rejected[c.seq]
		switch {
		case !ours:
			rep.violation("command %d (message id %q) is in %s but the run did not publish it", c.seq, c.id, snats.CommandStream)
		case d.job != "":
			if v := spelling(d, JobOf(c.payload)); v != "" {
				rep.violation("command %d: %s", c.seq, v)
			}
			want[d.job] = true
			switch {
			case isRejected:
				rep.violation("command %d (job %s) was rejected as %s (promise 7)", c.seq, d.job, rej.reason)
			case len(histories[d.job]) == 0:
				rep.violation("command %d maps to job %s, which has no events (promise 7)", c.seq, d.job)
			}
		case !isRejected:
			rep.violation("command %d is invalid (%s) and has no rejection record (promise 7)", c.seq, d.reason)
		case rej.reason != d.reason:
			rep.violation("command %d was rejected as %s, want %s (promise 7)", c.seq, rej.reason, d.reason)
		case string(rej.payload) != string(c.payload):
			rep.violation("command %d: its rejection record does not hold its payload byte for byte (promise 7)", c.seq)
		}
	}
	for _, c := range drawn {
		switch {
		case ids[c.id]:
		case aged:
			// Left SERP_COMMANDS with the retention horizon (its max
			// age); the job it drew must still be in the log.
			rep.AgedCommands++
			if c.job != "" {
				want[c.job] = true
				if len(histories[c.job]) == 0 {
					rep.violation("command %s left %s by its max age, and its job %s has no events (promise 7)", c.id, snats.CommandStream, c.job)
				}
			}
		default:
			rep.violation("command %s was acknowledged to the publisher but is not in %s", c.id, snats.CommandStream)
		}
	}
	rep.Commands = len(stored)
	return want
}

// quietStats reads the sandbox's stats with read until no search runs
// there (Stats.Running is 0), every poll for at most bound; it returns the
// last stats read and whether they were quiet.
func quietStats(ctx context.Context, read func(context.Context) (sandbox.Stats, error), poll, bound time.Duration) (sandbox.Stats, bool, error) {
	deadline := time.Now().Add(bound)
	for {
		st, err := read(ctx)
		if err != nil || st.Running == 0 {
			return st, err == nil, err
		}
		if !time.Now().Before(deadline) {
			return st, false, nil
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return st, false, ctx.Err()
		case <-t.C:
		}
	}
}

// fetchStats reads the sandbox's counters and books.
func fetchStats(ctx context.Context, base, token string) (sandbox.Stats, error) {
	var st sandbox.Stats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/sandbox/stats", nil)
	if err != nil {
		return st, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("chaos: sandbox stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("chaos: sandbox stats: HTTP %d", resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// chargedIDs asks the sandbox's billing ledger for the request ids of the
// charges of a job's keys.
func (r *run) chargedIDs(ctx context.Context, s aggregate.State) []string {
	c, err := serper.New(serper.Config{BaseURL: r.sbURL, Token: r.token, Timeout: 10 * time.Second, AllowShortTimeout: true})
	if err != nil {
		return nil
	}
	defer c.CloseIdleConnections()
	var keys []string
	for _, a := range s.Attempts {
		keys = append(keys, a.Key)
	}
	entries, err := c.Ledger(ctx, serper.LedgerQuery{Keys: keys})
	if err != nil {
		return nil
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.RequestID)
	}
	return ids
}

// checkLateExecutions holds the provider's ledger against the keys'
// deadlines (promise 3, from the provider's side): a charged execution
// that ended later than its key's deadline plus the longest search started
// after the deadline, so a request of the key left past it.
func (r *run) checkLateExecutions(ctx context.Context, deadlines map[string]time.Time) {
	if len(deadlines) == 0 {
		return
	}
	c, err := serper.New(serper.Config{BaseURL: r.sbURL, Token: r.token, Timeout: 30 * time.Second, AllowShortTimeout: true})
	if err != nil {
		r.rep.violation("ledger: %v", err)
		return
	}
	defer c.CloseIdleConnections()
	keys := make([]string, 0, len(deadlines))
	for k := range deadlines {
		keys = append(keys, k)
	}
	entries, err := c.Ledger(ctx, serper.LedgerQuery{Keys: keys})
	if err != nil {
		r.rep.violation("ledger: %v", err)
		return
	}
	longest := max(r.cfg.SearchTime, r.cfg.SlowSearchTime) + time.Second
	for _, e := range entries {
		if d := deadlines[e.IdempotencyKey]; !d.IsZero() && e.At.After(d.Add(longest)) {
			r.rep.violation("key %s: its charged execution ended at %s, %s after its deadline: a request left past the deadline (promise 3)",
				e.IdempotencyKey, e.At.Format(time.RFC3339Nano), e.At.Sub(d).Round(time.Millisecond))
		}
	}
	r.rep.LedgerChecked = len(entries)
}

// spelling checks that a command became the job the run drew it for: a
// command spelled another way (spaces, case, a slot in another zone) is
// the same observation, so the same job (promise 1). The engine's own
// rules map a command to its job here, so only the run knows which job
// each spelling must be; "" when it is right or the run did not draw it.
func spelling(drawn command, job string) string {
	if drawn.job == "" || drawn.job == job {
		return ""
	}
	return fmt.Sprintf("it spells the observation of job %s but maps to job %s: one observation, two jobs (promise 1)", drawn.job, job)
}

// observations checks that the run's valid commands made one job per
// observation drawn.
func observations(drawn []command, jobs int) string {
	distinct := map[string]bool{}
	for _, c := range drawn {
		if c.job != "" {
			distinct[c.job] = true
		}
	}
	if jobs != len(distinct) {
		return fmt.Sprintf("%d observations were ordered and %d jobs made of them (promise 1)", len(distinct), jobs)
	}
	return ""
}

// secretToken draws a run's sandbox token: no one else knows it.
func secretToken() string {
	b := make([]byte, 24)
	_, _ = crand.Read(b)
	return "chaos-" + hex.EncodeToString(b)
}

// holdsToken reports a message that holds the run's API token in its data
// or a header (promise 8).
func (r *run) holdsToken(what, subject string, h natsgo.Header, data []byte) {
	found := bytes.Contains(data, []byte(r.token))
	for _, vs := range h {
		for _, v := range vs {
			found = found || strings.Contains(v, r.token)
		}
	}
	if found {
		r.rep.violation("%s on %s holds the API token (promise 8)", what, subject)
	}
}

// logsHoldToken reports every process log of the run that holds the API
// token (promise 8): the workers', which use it, the sandbox's, which
// checks it, and the NATS server's.
func (r *run) logsHoldToken() {
	logs, _ := filepath.Glob(filepath.Join(r.dir, "logs", "*.log"))
	for _, name := range logs {
		b, err := os.ReadFile(name)
		if err != nil {
			r.rep.violation("read %s: %v", name, err)
			continue
		}
		if bytes.Contains(b, []byte(r.token)) {
			r.rep.violation("the log %s holds the API token (promise 8)", filepath.Base(name))
		}
	}
}
