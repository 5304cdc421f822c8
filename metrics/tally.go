package metrics

import (
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
)

// RecentJobs is how many of the most recently changed jobs a Tally
// remembers, for the status page; DoubledJobs how many of the jobs the
// API charged twice.
const (
	RecentJobs  = 20
	DoubledJobs = 100
)

// Tally folds the event log into running totals. Records the tally is
// past are skipped, so feeding one twice changes nothing: those below the
// last sequence applied, and at it those up to the last version applied
// (the records of one message, a group written together, share its
// sequence).
// It is safe for concurrent use; records come from one goroutine, in
// stream order.
//
// It remembers each job it has seen, in as little memory as it can: a
// job whose id is 32 lowercase hex digits (every id aggregate.JobID makes)
// and that has at most 3 purchases and 3 re-purchases is one byte in a map
// keyed by the 16 bytes of its id: 21 to 42 bytes of heap with the map's
// slack, depending on where its growth stands (38 MB for a million jobs).
// A job waiting for the billing ledger also keeps why and since when,
// until it leaves the queue. A job with another id, or with more
// purchases, is kept whole under its id: some 120 to 170 bytes.
//
// A tally made to forget finished jobs (ForgetFinished) lets a job go
// once it is finished, so its memory follows the jobs in flight, not the
// jobs ever run; the rare event that comes for a finished job later (a
// re-purchase an operator authorises) needs the job's earlier events:
// Apply leaves such an event to ApplyWithHistory.
type Tally struct {
	mu  sync.Mutex
	seq uint64
	// ver is the version of the last event applied at seq; the highest
	// there is once a message is counted undecodable.
	ver uint64
	// jobs holds the jobs whose id is hex and whose counts fit a
	// packedJob; wide holds every other job (see remember).
	jobs map[hexID]packedJob
	wide map[string]jobTally
	c    Counts
	// recent holds job ids, the most recently changed first; doubled the
	// jobs the API charged twice under one key, the latest first (at most
	// DoubledJobs of them).
	recent  []string
	doubled []string
	// reconciling holds the jobs waiting for the billing ledger. It is nil
	// when there are none, so that a burst does not keep its memory.
	reconciling map[string]waiting
	// forget lets finished jobs go (ForgetFinished).
	forget bool
	// log is the creation time of the log counted (zero: not known yet):
	// a log deleted and made again under the same name is another.
	log time.Time
	// end is where the log ended when its reader began (CatchUpTo), 0
	// until told; caughtUp is set once everything up to it is applied.
	end      uint64
	caughtUp bool
}

// jobTally is what a Tally remembers of one job.
type jobTally struct {
	status aggregate.Status
	// purchases are the searches serpent bought (aggregate.Purchases's
	// Bought); apiDoubles the API's own double charges found live.
	purchases   int
	repurchases int
	apiDoubles  int
	// checking: a succeeded job whose stored key's charges wait for a
	// check (aggregate.State.CheckPending). It is still in flight.
	checking bool
}

// doubled reports whether the job's log shows more purchases than one plus
// the re-purchases an operator authorised: a promise broken.
func (j jobTally) doubled() bool { return j.purchases > 1+j.repurchases }

// live reports whether the job still has work ahead: not finished, or
// waiting for the check of its charges.
func (j jobTally) live() bool { return !j.status.Terminal() || j.checking }

// waiting is what the reconciling queue shows of a job in it.
type waiting struct {
	reason string    // why it reconciles
	since  time.Time // when it began to
}

// hexID is a job id of 32 lowercase hex digits, as the 16 bytes it spells.
type hexID [16]byte

// parseHexID returns the bytes id spells, or false if it is not 32
// lowercase hex digits. Only lowercase is taken so that two different ids
// never share bytes.
func parseHexID(id string) (hexID, bool) {
	var h hexID
	if len(id) != 2*len(h) {
		return h, false
	}
	for i := range h {
		hi, lo := hexDigits[id[2*i]], hexDigits[id[2*i+1]]
		if hi|lo > 0xf {
			return hexID{}, false
		}
		h[i] = hi<<4 | lo
	}
	return h, true
}

// hexDigits is the value of each lowercase hex digit, 0xff for any other
// byte.
var hexDigits = func() (d [256]byte) {
	for i := range d {
		d[i] = 0xff
	}
	for i, c := range "0123456789abcdef" {
		d[c] = byte(i)
	}
	return d
}()

// packedJob is a jobTally in one byte: the status's index in
// packedStatuses (bits 0-3), the purchases (bits 4-5) and the
// re-purchases (bits 6-7).
type packedJob uint8

// packedStatuses are the statuses a packedJob holds, by index. Its length
// is checked at compile time: 4 bits hold 16. The index after them is a
// succeeded job whose charges wait for a check (packedChecking).
var packedStatuses = [...]aggregate.Status{aggregate.StatusNew, aggregate.StatusScheduled,
	aggregate.StatusSending, aggregate.StatusRetrying, aggregate.StatusReconciling,
	aggregate.StatusSucceeded, aggregate.StatusFailed, aggregate.StatusChargedNoResult,
	aggregate.StatusCancelled}

// packedChecking is the status code of a succeeded job still checking.
const packedChecking = len(packedStatuses)

var _ [16 - packedChecking - 1]struct{}

// pack returns j in a byte, or false if it does not fit: a status not in
// packedStatuses, more than 3 purchases or re-purchases, or a double
// charge of the API (rare: such jobs are kept wide).
func pack(j jobTally) (packedJob, bool) {
	code := slices.Index(packedStatuses[:], j.status)
	if j.checking {
		code = packedChecking
		if j.status != aggregate.StatusSucceeded {
			code = -1
		}
	}
	if code < 0 || j.purchases < 0 || j.purchases > 3 || j.repurchases < 0 || j.repurchases > 3 || j.apiDoubles != 0 {
		return 0, false
	}
	return packedJob(code | j.purchases<<4 | j.repurchases<<6), true
}

func (p packedJob) unpack() jobTally {
	j := jobTally{purchases: int(p >> 4 & 3), repurchases: int(p >> 6)}
	if code := int(p & 0xf); code == packedChecking {
		j.status, j.checking = aggregate.StatusSucceeded, true
	} else {
		j.status = packedStatuses[code]
	}
	return j
}

// job returns what t remembers of a job: the zero jobTally if nothing.
func (t *Tally) job(id string, h hexID, isHex bool) jobTally {
	if isHex {
		if p, ok := t.jobs[h]; ok {
			return p.unpack()
		}
	}
	return t.wide[id]
}

// remember keeps j as what t knows of a job, in a byte when it fits, in
// one map only.
func (t *Tally) remember(id string, h hexID, isHex bool, j jobTally) {
	p, fits := pack(j)
	switch {
	case j == (jobTally{}): // nothing to remember
		if isHex {
			delete(t.jobs, h)
		}
		delete(t.wide, id)
	case isHex && fits:
		t.jobs[h] = p
		if len(t.wide) > 0 {
			delete(t.wide, id) // it did not fit before
		}
	default:
		if isHex {
			delete(t.jobs, h)
		}
		t.wide[id] = j
	}
}

// Counts are the totals of a Tally. Maps are keyed by the public names of
// the events' vocabulary (states, classes, reasons, verdicts, types).
type Counts struct {
	// Seq is the stream sequence of the last event applied.
	Seq uint64 `json:"seq"`
	// Jobs counts jobs by state.
	Jobs map[aggregate.Status]int `json:"jobs"`
	// Events counts events by type.
	Events map[string]uint64 `json:"events"`
	// Sends counts send outcomes by class (success, unknown, retryable,
	// failure...): every send that came back, or did not. A success is
	// counted by its ObservationStored, a confirmed failure by its
	// JobFailed, the others by their OutcomeClassified.
	Sends map[string]uint64 `json:"sends"`
	// Rotations counts new keys by the reason the old one was replaced.
	Rotations map[string]uint64 `json:"rotations"`
	// Reconciliations counts billing ledger verdicts (charged,
	// not_charged); Checks the verdicts of checks of a stored key's
	// charges (confirmed, double_charge).
	Reconciliations map[string]uint64 `json:"reconciliations"`
	Checks          map[string]uint64 `json:"checks"`
	// Purchases are searches the log says were bought: stored
	// observations and charges a reconciliation found.
	Purchases uint64 `json:"purchases"`
	// ResultPages are pages with results of stored observations (billed
	// once the account's free pages are used); ChargedPages the billed
	// pages of charges found without a result.
	ResultPages  uint64 `json:"result_pages"`
	ChargedPages uint64 `json:"charged_pages"`
	// DoubleCharges counts jobs with more purchases than one plus their
	// authorised re-purchases: serpent bought twice. It must stay 0.
	DoubleCharges int `json:"suspected_double_charges"`
	// APIDoubleCharges counts the charges beyond the first that the API
	// made under one key (its own double purchase), found live by a check
	// of a stored key's charges or by a reconciliation; APIDoubleJobs the
	// jobs. serpent cannot prevent them; each one is shown.
	APIDoubleCharges int `json:"api_double_charges"`
	APIDoubleJobs    int `json:"api_double_charged_jobs"`
	// Undecodable counts messages of the log that are not events.
	Undecodable uint64 `json:"undecodable"`
	// CaughtUp is set once the tally has applied the log as it stood when
	// its reader began (see CatchUpTo). Until then the totals are those
	// of the log's first part only.
	CaughtUp bool `json:"caught_up"`
}

// Reconciling is a job waiting for the billing ledger.
type Reconciling struct {
	JobID  string    `json:"job_id"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{jobs: map[hexID]packedJob{}, wide: map[string]jobTally{}, c: Counts{
		Jobs: map[aggregate.Status]int{}, Events: map[string]uint64{}, Sends: map[string]uint64{},
		Rotations: map[string]uint64{}, Reconciliations: map[string]uint64{}, Checks: map[string]uint64{},
	}}
}

// Log is the creation time of the event log t counts, zero until known
// (Resume, Follow and RestoreCheckpoint tell it).
func (t *Tally) Log() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.log
}

// countsLog reports whether t counts the log made at created: it takes that
// log for its own if it knows of none yet.
func (t *Tally) countsLog(created time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.log.IsZero() {
		t.log = created
	}
	return t.log.Equal(created)
}

// reset makes t a tally that has applied nothing, of no log yet, as
// NewTally made it (ForgetFinished stays as set).
func (t *Tally) reset() {
	n := NewTally()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq, t.ver, t.jobs, t.wide, t.c = 0, 0, n.jobs, n.wide, n.c
	t.recent, t.doubled, t.reconciling, t.end, t.caughtUp, t.log = nil, nil, nil, 0, false, time.Time{}
}

// ForgetFinished makes t let every job go once it is finished, and
// returns t. Call it before the first record. Whoever feeds t must then
// give a finished job's earlier events with its next event (see Apply);
// Follow does.
func (t *Tally) ForgetFinished() *Tally {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget = true
	return t
}

// Remembered is how many jobs t keeps in memory.
func (t *Tally) Remembered() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.jobs) + len(t.wide)
}

// ApplyWithHistory adds r as Apply does, for a job t has let go: history
// holds the job's events (those before r's version count; any others are
// ignored), from which t finds where the job stood. It is taken as whole:
// whoever reads it makes sure it holds every version before r's (Follow
// reads a short one again).
func (t *Tally) ApplyWithHistory(r projections.Record, history []events.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.apply(r, history, true)
}

// CatchUpTo tells t where the log ended when its reader began: t is
// caught up (Counts.CaughtUp) once it has applied everything up to
// sequence last, at once if it already has or if last is 0 (an empty
// log). Once caught up it stays so. A last below one given before counts
// (the reader found the log's end sooner: its last messages were
// deleted).
func (t *Tally) CatchUpTo(last uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.caughtUp {
		return
	}
	if t.end == 0 || last < t.end {
		t.end = last
	}
	t.caughtUp = t.seq >= t.end
}

// advance moves t's place to the event of version ver at seq, and notes
// when it reaches the end CatchUpTo set.
func (t *Tally) advance(seq, ver uint64) {
	t.seq, t.ver = seq, ver
	if !t.caughtUp && t.end > 0 && seq >= t.end {
		t.caughtUp = true
	}
}

// Seq is the stream sequence of the last event applied.
func (t *Tally) Seq() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
}

// Apply adds one event of the log. Records must come in stream order. It
// reports false, and leaves r to ApplyWithHistory, when t has let r's job
// go and the job had events before r (only a tally that forgets finished
// jobs ever does).
func (t *Tally) Apply(r projections.Record) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.apply(r, nil, false)
}

// apply adds r, unless its job was let go and there is no history to find
// where it stood; with one, a job t does not hold starts from there.
func (t *Tally) apply(r projections.Record, history []events.Event, withHistory bool) bool {
	if r.Seq < t.seq || r.Seq == t.seq && r.Event.Version <= t.ver {
		return true
	}
	e := r.Event
	h, isHex := parseHexID(e.JobID)
	j := t.job(e.JobID, h, isHex)
	if j == (jobTally{}) && t.forget && e.Version > 1 {
		if !withHistory {
			return false
		}
		// A job is let go only when finished, so it comes back finished
		// (or as nothing), never in the reconciling queue.
		j = replayJob(history, e.Version)
	}
	t.advance(r.Seq, e.Version)
	wasDoubled := j.doubled()
	t.c.Events[e.Type()]++
	switch d := e.Data.(type) {
	case events.OutcomeClassified:
		t.c.Sends[d.Class]++
	case events.KeyRotated:
		t.c.Rotations[d.Reason]++
	case events.Reconciled:
		t.c.Reconciliations[d.Verdict]++
		if d.Verdict == aggregate.VerdictCharged {
			for _, en := range d.Entries {
				t.c.ChargedPages += uint64(max(en.BilledPages, 0))
			}
		}
	case events.ChargesChecked:
		t.c.Checks[d.Verdict]++
	case events.ObservationStored:
		t.c.Sends[string(aggregate.ClassSuccess)]++ // a success is stored, not classified
		t.c.ResultPages += uint64(max(d.Pages, 0))
	case events.JobFailed:
		if d.Reason == aggregate.ReasonAPIError {
			t.c.Sends[string(aggregate.ClassFailure)]++ // so is a confirmed failure
		}
	}
	bought, apiDoubles := j.count(e)
	t.c.Purchases += uint64(bought + apiDoubles)
	if apiDoubles > 0 {
		if j.apiDoubles == apiDoubles {
			t.c.APIDoubleJobs++
		}
		t.c.APIDoubleCharges += apiDoubles
		t.noteDoubled(e.JobID)
	}
	if now := j.doubled(); now != wasDoubled {
		if now {
			t.c.DoubleCharges++
		} else {
			t.c.DoubleCharges--
		}
	}
	// The job's state, exactly as the aggregate moves it: Apply on a
	// state that holds only what the transitions read. The reason a job
	// reconciles is only shown while it does, and every transition into
	// reconciling sets it, so only a job in the queue keeps it.
	var w waiting
	if j.status == aggregate.StatusReconciling {
		w = t.reconciling[e.JobID]
	}
	s := aggregate.Apply(aggregate.State{Status: j.status, Reconcile: w.reason, CheckPending: j.checking}, e)
	switch {
	case s.Status != j.status:
		if j.status != aggregate.StatusNew {
			t.c.Jobs[j.status]--
		}
		t.c.Jobs[s.Status]++
		if j.status == aggregate.StatusReconciling {
			t.dequeue(e.JobID)
		}
		if s.Status == aggregate.StatusReconciling {
			t.enqueue(e.JobID, waiting{reason: s.Reconcile, since: e.Time})
		}
	case s.Status == aggregate.StatusReconciling && s.Reconcile != w.reason:
		w.reason = s.Reconcile
		t.enqueue(e.JobID, w)
	}
	j.status, j.checking = s.Status, s.CheckPending
	if t.forget && !j.live() {
		j = jobTally{} // finished: counted, and let go
	}
	t.remember(e.JobID, h, isHex, j)
	t.touch(e.JobID)
	return true
}

// count adds what e says of the job's purchases to j, as
// aggregate.Purchases counts them, and returns what e adds: searches
// serpent bought, and double charges of the API found. A reconciliation
// lists only charges the job had not accounted for before
// (aggregate.Verify checks), so they add up without request ids kept.
func (j *jobTally) count(e events.Event) (bought, apiDoubles int) {
	if _, ok := e.Data.(events.RepurchaseAuthorized); ok {
		j.repurchases++
		return 0, 0
	}
	p := aggregate.PurchasesIn(e)
	j.purchases += p.Bought
	j.apiDoubles += p.Doubled
	return p.Bought, p.Doubled
}

// noteDoubled puts a job the API charged twice at the front of the list
// of such jobs.
func (t *Tally) noteDoubled(jobID string) {
	if i := slices.Index(t.doubled, jobID); i >= 0 {
		t.doubled = slices.Delete(t.doubled, i, i+1)
	}
	t.doubled = slices.Insert(t.doubled, 0, jobID)
	if len(t.doubled) > DoubledJobs {
		t.doubled = t.doubled[:DoubledJobs]
	}
}

// Doubled returns the jobs the API charged twice under one key, as found
// live, the latest first: at most DoubledJobs of them.
func (t *Tally) Doubled() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.doubled)
}

// replayJob is where a job stood before its event of version before, from
// its history: what a Tally would have remembered of it.
func replayJob(history []events.Event, before uint64) jobTally {
	var (
		j      jobTally
		reason string // why it reconciles, which its transitions read
	)
	for _, e := range history {
		if e.Version >= before {
			continue
		}
		j.count(e)
		s := aggregate.Apply(aggregate.State{Status: j.status, Reconcile: reason, CheckPending: j.checking}, e)
		j.status, reason, j.checking = s.Status, s.Reconcile, s.CheckPending
	}
	return j
}

// enqueue puts a job in the reconciling queue, or updates it there.
func (t *Tally) enqueue(jobID string, w waiting) {
	if t.reconciling == nil {
		t.reconciling = map[string]waiting{}
	}
	t.reconciling[jobID] = w
}

// dequeue takes a job out of the reconciling queue; an empty queue lets
// its map go, which never shrinks.
func (t *Tally) dequeue(jobID string) {
	delete(t.reconciling, jobID)
	if len(t.reconciling) == 0 {
		t.reconciling = nil
	}
}

// Undecodable counts a message of the log that is not an event.
func (t *Tally) Undecodable(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq > t.seq {
		t.advance(seq, math.MaxUint64)
		t.c.Undecodable++
	}
}

// touch moves a job to the front of the recent list.
func (t *Tally) touch(jobID string) {
	if i := slices.Index(t.recent, jobID); i >= 0 {
		t.recent = slices.Delete(t.recent, i, i+1)
	}
	t.recent = slices.Insert(t.recent, 0, jobID)
	if len(t.recent) > RecentJobs {
		t.recent = t.recent[:RecentJobs]
	}
}

// Counts returns a copy of the totals.
func (t *Tally) Counts() Counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.c
	c.Seq, c.CaughtUp = t.seq, t.caughtUp
	c.Jobs = cloneMap(t.c.Jobs)
	c.Events, c.Sends = cloneMap(t.c.Events), cloneMap(t.c.Sends)
	c.Rotations, c.Reconciliations, c.Checks = cloneMap(t.c.Rotations), cloneMap(t.c.Reconciliations), cloneMap(t.c.Checks)
	for _, s := range aggregate.Statuses() {
		c.Jobs[s] += 0
	}
	return c
}

// Recent returns the ids of the most recently changed jobs, newest first.
func (t *Tally) Recent() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.recent)
}

// Reconciling lists up to limit jobs waiting for the billing ledger, the
// longest waiting first, and how many there are in all.
func (t *Tally) Reconciling(limit int) ([]Reconciling, int) {
	t.mu.Lock()
	var out []Reconciling
	for id, w := range t.reconciling {
		out = append(out, Reconciling{JobID: id, Reason: w.reason, Since: w.since})
	}
	t.mu.Unlock()
	sort.Slice(out, func(a, b int) bool {
		if !out[a].Since.Equal(out[b].Since) {
			return out[a].Since.Before(out[b].Since)
		}
		return out[a].JobID < out[b].JobID
	})
	n := len(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, n
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
