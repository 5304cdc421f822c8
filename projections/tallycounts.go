package projections

import (
	"slices"
	"sort"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
)

// TallyCounts are the totals of a Tally. Maps are keyed by the public names of
// the events' vocabulary (states, classes, reasons, verdicts, types).
type TallyCounts struct {
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
func (t *Tally) Counts() TallyCounts {
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
