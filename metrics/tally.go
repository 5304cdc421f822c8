package metrics

import (
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
)

// RecentJobs is how many of the most recently changed jobs a Tally
// remembers, for the status page.
const RecentJobs = 20

// Tally folds the event log into running totals. Records at or below the
// last sequence applied are skipped, so feeding one twice changes nothing.
// It keeps a few bytes per job (its state, purchases and re-purchases), so
// a million jobs cost some 100 MB. It is safe for concurrent use.
type Tally struct {
	mu   sync.Mutex
	seq  uint64
	jobs map[string]*jobTally
	c    Counts
	// recent holds job ids, the most recently changed first.
	recent []string
	// reconciling holds the jobs waiting for the billing ledger.
	reconciling map[string]*jobTally
}

// jobTally is what a Tally remembers of one job.
type jobTally struct {
	status      aggregate.Status
	reconcile   string // why it reconciles
	since       time.Time
	updated     time.Time
	purchases   int
	repurchases int
}

// doubled reports whether the job's log shows more purchases than one plus
// the re-purchases an operator authorised: a promise broken.
func (j *jobTally) doubled() bool { return j.purchases > 1+j.repurchases }

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
	// not_charged).
	Reconciliations map[string]uint64 `json:"reconciliations"`
	// Purchases are searches the log says were bought: stored
	// observations and charges a reconciliation found.
	Purchases uint64 `json:"purchases"`
	// ResultPages are pages with results of stored observations (billed
	// once the account's free pages are used); ChargedPages the billed
	// pages of charges found without a result.
	ResultPages  uint64 `json:"result_pages"`
	ChargedPages uint64 `json:"charged_pages"`
	// DoubleCharges counts jobs with more purchases than one plus their
	// authorised re-purchases. It must stay 0.
	DoubleCharges int `json:"suspected_double_charges"`
	// Undecodable counts messages of the log that are not events.
	Undecodable uint64 `json:"undecodable"`
}

// Reconciling is a job waiting for the billing ledger.
type Reconciling struct {
	JobID  string    `json:"job_id"`
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{jobs: map[string]*jobTally{}, reconciling: map[string]*jobTally{}, c: Counts{
		Jobs: map[aggregate.Status]int{}, Events: map[string]uint64{}, Sends: map[string]uint64{},
		Rotations: map[string]uint64{}, Reconciliations: map[string]uint64{},
	}}
}

// Seq is the stream sequence of the last event applied.
func (t *Tally) Seq() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
}

// Apply adds one event of the log. Records must come in stream order.
func (t *Tally) Apply(r projections.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r.Seq <= t.seq {
		return
	}
	t.seq = r.Seq
	e := r.Event
	j := t.jobs[e.JobID]
	if j == nil {
		j = &jobTally{}
		t.jobs[e.JobID] = j
	}
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
			t.c.Purchases++
			j.purchases++
		}
		for _, en := range d.Entries {
			t.c.ChargedPages += uint64(max(en.BilledPages, 0))
		}
	case events.ObservationStored:
		t.c.Sends[string(aggregate.ClassSuccess)]++ // a success is stored, not classified
		t.c.Purchases++
		t.c.ResultPages += uint64(max(d.Pages, 0))
		j.purchases++
	case events.JobFailed:
		if d.Reason == aggregate.ReasonAPIError {
			t.c.Sends[string(aggregate.ClassFailure)]++ // so is a confirmed failure
		}
	case events.RepurchaseAuthorized:
		j.repurchases++
	}
	if now := j.doubled(); now != wasDoubled {
		if now {
			t.c.DoubleCharges++
		} else {
			t.c.DoubleCharges--
		}
	}
	// The job's state, exactly as the aggregate moves it: Apply on a
	// state that holds only what the transitions read.
	s := aggregate.Apply(aggregate.State{Status: j.status, Reconcile: j.reconcile}, e)
	if s.Status != j.status {
		if j.status != aggregate.StatusNew {
			t.c.Jobs[j.status]--
		}
		t.c.Jobs[s.Status]++
		j.since = e.Time
		delete(t.reconciling, e.JobID)
		if s.Status == aggregate.StatusReconciling {
			t.reconciling[e.JobID] = j
		}
	}
	j.status, j.reconcile, j.updated = s.Status, s.Reconcile, e.Time
	t.touch(e.JobID)
}

// Undecodable counts a message of the log that is not an event.
func (t *Tally) Undecodable(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq > t.seq {
		t.seq = seq
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
	c.Seq = t.seq
	c.Jobs = cloneMap(t.c.Jobs)
	c.Events, c.Sends = cloneMap(t.c.Events), cloneMap(t.c.Sends)
	c.Rotations, c.Reconciliations = cloneMap(t.c.Rotations), cloneMap(t.c.Reconciliations)
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
	for id, j := range t.reconciling {
		out = append(out, Reconciling{JobID: id, Reason: j.reconcile, Since: j.since})
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
