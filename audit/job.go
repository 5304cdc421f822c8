package audit

import (
	"fmt"
	"slices"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// Rules the audit adds to aggregate.Verify's. Findings name them.
const (
	// RuleReadable: every message of the log decodes strictly and
	// belongs to the job its subject names.
	RuleReadable = "readable_event"
	// RuleSettled: every job is finished or legitimately pending.
	RuleSettled = "terminal_or_pending"
	// RuleCommand: every published command became a job or a rejection.
	RuleCommand = "command_handled"
	// RuleOneCharge: an accepted first execution with pages is charged
	// exactly once.
	RuleOneCharge = "one_charge_per_execution"
	// RuleExplained: every charge is an accepted execution's, or one a
	// reconciliation found (charged_no_result).
	RuleExplained = "charge_explained"
	// RuleLedgerPurchases: no job is charged more often than once plus its
	// authorised re-purchases.
	RuleLedgerPurchases = "ledger_at_most_one_purchase"
)

// Finding is one broken promise.
type Finding struct {
	Rule  string `json:"rule"`
	JobID string `json:"job_id,omitempty"`
	// Version is the job's event the finding is about, 0 for the job as a
	// whole.
	Version uint64 `json:"version,omitempty"`
	// Seq is the stream sequence of an unreadable event or of a command.
	Seq       uint64 `json:"seq,omitempty"`
	Key       string `json:"key,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Detail    string `json:"detail"`
}

func (f Finding) String() string {
	where := ""
	switch {
	case f.JobID != "" && f.Version > 0:
		where = fmt.Sprintf("job %s v%d", f.JobID, f.Version)
	case f.JobID != "":
		where = "job " + f.JobID
	case f.Seq > 0:
		where = fmt.Sprintf("#%d", f.Seq)
	default:
		where = "ledger"
	}
	return fmt.Sprintf("%s: %s: %s", where, f.Rule, f.Detail)
}

// DefaultStuckAfter is how long a job may be overdue before the audit
// calls it stuck: longer than the engine's sweep for lost timers (10
// minutes), which re-arms any job that lost its wake-up.
const DefaultStuckAfter = 15 * time.Minute

// Options are the audit's inputs besides the data.
type Options struct {
	// Now is the time the audit judges pending jobs at.
	Now time.Time
	// StuckAfter is how long a job may be overdue, and a command wait
	// for its consumer to settle it; 0 means DefaultStuckAfter.
	StuckAfter time.Duration
	// WithoutLedger says the billing ledger will not be joined: the audit
	// then keeps of a job only what its report needs, not its Ledger facts
	// (keys, request ids, the charge of its stored observation, reconciled
	// charges, the key a cancel left unresolved); Auditor.Lookups and
	// Auditor.Ledger panic.
	WithoutLedger bool
	// Workers is how many chunks of the log CheckLog decodes, and how many
	// jobs it checks, at once; 0 means GOMAXPROCS.
	Workers int
}

func (o Options) stuckAfter() time.Duration {
	if o.StuckAfter <= 0 {
		return DefaultStuckAfter
	}
	return o.StuckAfter
}

// Job is what the audit learnt of one job: its findings, and the facts the
// ledger join needs (unless audited WithoutLedger).
type Job struct {
	ID      string
	Status  aggregate.Status
	Version uint64
	// Pending says why an unfinished job is legitimately pending; empty
	// for a finished job and for a stuck one (which has a finding).
	Pending  string
	Findings []Finding
	// Purchases are what the log says the job bought: serpent's searches,
	// and the API's double charges that a check or a reconciliation found.
	Purchases   aggregate.Purchases
	Repurchases int
	// Source is the command the job was made of (JobScheduled.Source, such
	// as SERP_COMMANDS:<seq>).
	Source string
	// Ledger is what the join with the billing ledger needs; nil for a job
	// audited WithoutLedger, which an audit of millions of jobs keeps in
	// less than half the memory.
	Ledger *LedgerFacts
}

// LedgerFacts are the facts of a job the join with the billing ledger
// needs.
type LedgerFacts struct {
	// Keys are the job's attempt keys, RequestIDs every request id it saw.
	Keys       []string
	RequestIDs []string
	// Accepted is the charge the job's stored observation was bought with,
	// if the last one it stored has pages; zero otherwise.
	Accepted Charge
	// Reconciled are the charges reconciliations found; Checked those the
	// check of the stored key's charges found.
	Reconciled []events.LedgerEntry
	Checked    []events.LedgerEntry
	// Unresolved is the key a cancelled job left with an unknown outcome.
	Unresolved string
}

// Charge is what the ledger join needs of a stored observation
// (events.ObservationStored): the key and request id its charge is found
// by, and its pages.
type Charge struct {
	Key       string
	RequestID string
	Pages     int
}

// CheckJob audits one job's history, in log order, at o.Now.
func CheckJob(evs []events.Event, o Options) Job {
	s := aggregate.Fold(evs)
	j := Job{ID: s.JobID, Status: s.Status, Version: s.Version, Repurchases: s.Repurchases, Source: s.Source}
	if j.ID == "" && len(evs) > 0 {
		j.ID = evs[0].JobID
	}
	broken := aggregate.Verify(evs)
	pending, stuck := Pending(s, o.Now, o.stuckAfter())
	n := len(broken) // the findings, allocated to size: the audit keeps them
	if stuck != "" {
		n++
	}
	if n > 0 {
		j.Findings = make([]Finding, 0, n)
	}
	for _, v := range broken {
		j.Findings = append(j.Findings, Finding{Rule: v.Rule, JobID: shared(v.JobID, j.ID), Version: v.Version, Detail: v.Detail})
	}
	j.Purchases = aggregate.PurchasesOf(evs)
	if !o.WithoutLedger {
		j.Ledger = ledgerFacts(s, evs)
	}
	switch {
	case stuck != "":
		j.Findings = append(j.Findings, Finding{Rule: RuleSettled, JobID: j.ID, Detail: stuck})
	default:
		j.Pending = pending
	}
	return j
}

// shared returns the string of in equal to s, if any, else s: equal
// strings the audit keeps then share their bytes.
func shared(s string, in ...string) string {
	if i := slices.Index(in, s); i >= 0 {
		return in[i]
	}
	return s
}

// ledgerFacts is what the join with the billing ledger needs of a job.
func ledgerFacts(s aggregate.State, evs []events.Event) *LedgerFacts {
	f := &LedgerFacts{RequestIDs: s.RequestIDs()}
	if len(s.Attempts) > 0 {
		f.Keys = make([]string, 0, len(s.Attempts))
	}
	for _, a := range s.Attempts {
		f.Keys = append(f.Keys, a.Key)
	}
	for _, e := range evs {
		switch d := e.Data.(type) {
		case events.ObservationStored:
			f.Accepted = Charge{}
			if d.Pages > 0 { // the join looks at no other
				f.Accepted = Charge{Key: shared(d.Key, f.Keys...), RequestID: shared(d.RequestID, f.RequestIDs...), Pages: d.Pages}
			}
		case events.Reconciled:
			f.Reconciled = append(f.Reconciled, d.Entries...)
		case events.ChargesChecked:
			f.Checked = append(f.Checked, d.Entries...)
		}
	}
	if s.Cancel != nil {
		f.Unresolved = shared(s.Cancel.Unresolved, f.Keys...)
	}
	return f
}

// Pending judges a job that is not finished, at now. A job is
// legitimately pending when
//
//   - it waits for a time still to come: its slot, a backoff, or the end
//     of another worker's lease (State.Next says wait);
//   - it is due, or its lease ended, no longer than stuckAfter ago: a
//     worker will take it (timers fire late under load, and the sweep
//     re-arms a lost one within its period);
//   - it has been reconciling for no longer than stuckAfter: the
//     reconciler retries failed ledger look-ups every half minute.
//
// Otherwise it is stuck. pending says why a job may wait; stuck says why it
// is stuck; both are empty for a finished job.
func Pending(s aggregate.State, now time.Time, stuckAfter time.Duration) (pending, stuck string) {
	if !s.Exists() || s.Status.Terminal() {
		return "", ""
	}
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
	n := s.Next(now)
	switch n.Step {
	case aggregate.StepWait:
		// No decision plans a wait past the job's age budget (its lease
		// at most): a job parked beyond it once that has passed is stuck.
		age := aggregate.AgeDeadline(s.Policy, s.AgeStart())
		if n.At.After(age.Add(s.Policy.Lease.D())) && now.Sub(age) > stuckAfter {
			return "", fmt.Sprintf("%s, waiting until %s, past its age budget, which ended at %s", s.Status, stamp(n.At), stamp(age))
		}
		return fmt.Sprintf("%s, waiting until %s", s.Status, stamp(n.At)), ""
	case aggregate.StepReconcile:
		// A reconciling job may ask the ledger once its last search must
		// have ended; it is late from then on.
		since := s.UpdatedAt
		if settled := s.Settled(); settled.After(since) {
			since = settled
		}
		if now.Sub(since) <= stuckAfter {
			return fmt.Sprintf("reconciling since %s", stamp(since)), ""
		}
		return "", fmt.Sprintf("reconciling since %s, over %s ago", stamp(since), stuckAfter)
	}
	due := s.NextRunAt
	what := "due"
	if s.Status == aggregate.StatusSending {
		due, what = s.Lease.Until, "lease of "+s.Lease.Worker+" ended"
	}
	if now.Sub(due) <= stuckAfter {
		return fmt.Sprintf("%s, %s at %s", s.Status, what, stamp(due)), ""
	}
	return "", fmt.Sprintf("%s, %s at %s, over %s ago, and no worker took it", s.Status, what, stamp(due), stuckAfter)
}

// Ends reports whether an event leaves its job finished: after it the
// job needs no more events, so a reader of a long log can check the job
// and let its history go (and read it again should another event come).
func Ends(e events.Event) bool {
	switch d := e.Data.(type) {
	case events.ObservationStored, events.JobFailed, events.JobCancelled:
		return true
	case events.Reconciled:
		return d.Verdict == aggregate.VerdictCharged
	}
	return false
}
