package audit

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
)

// Report is the outcome of an audit. Its JSON form is what serpent audit
// -o json prints; field names are part of the format.
type Report struct {
	Now    time.Time `json:"now"`
	Events int       `json:"events"`
	Jobs   int       `json:"jobs"`
	// Statuses counts jobs by status.
	Statuses map[aggregate.Status]int `json:"statuses"`
	// Pending counts unfinished jobs that are legitimately pending.
	Pending int `json:"pending"`
	// Purchases counts the searches serpent bought: accepted executions
	// and keys a reconciliation found charged. RepurchasesAuthorized are
	// the deliberate extra ones.
	Purchases int `json:"purchases"`
	// DoubleCharges counts the charges beyond the first the API made under
	// one key (its own double purchase), as the log found them live: by a
	// check of a stored key's charges, or by a reconciliation.
	// DoubleChargedJobs lists their jobs, sorted.
	DoubleCharges         int             `json:"double_charges_found"`
	DoubleChargedJobs     []string        `json:"double_charged_jobs,omitempty"`
	RepurchasesAuthorized int             `json:"repurchases_authorized"`
	Commands              *CommandSummary `json:"commands,omitempty"`
	Ledger                *LedgerSummary  `json:"ledger,omitempty"`
	// Violations lists every finding, by job, version and rule; Rules
	// counts them by rule.
	Violations []Finding      `json:"violations"`
	Rules      map[string]int `json:"rules"`
}

// OK reports whether every promise held.
func (r Report) OK() bool { return len(r.Violations) == 0 }

// Auditor gathers audited jobs and the checks across them into a Report.
// It is not safe for concurrent use; CheckJob is, so callers check jobs in
// parallel and Add them one at a time.
type Auditor struct {
	opts   Options
	events int
	// jobs are the jobs added, in the order they were; byID finds them.
	jobs []Job
	byID index
	// findings are the audit's own, beyond those of the jobs.
	findings []Finding
	commands *CommandSummary
	ledger   *LedgerSummary
}

// New returns an Auditor judging at o.Now.
func New(o Options) *Auditor {
	return &Auditor{opts: o}
}

// Add records an audited job and counts its events.
func (a *Auditor) Add(j Job, events int) {
	a.AddJobs([]Job{j}, events)
}

// AddJobs records audited jobs, in order, and counts their events. The
// auditor takes jobs over, without a copy (a reader of millions of jobs
// hands them over whole): the caller must not use or change it after, as
// the auditor may move jobs down within it, a job added twice being left
// out.
func (a *Auditor) AddJobs(jobs []Job, events int) {
	a.events += events
	if a.jobs == nil { // the first jobs added
		a.jobs = jobs[:0:len(jobs)] // never past what it was given
	}
	a.byID.reserve(a.jobs, len(a.jobs)+len(jobs))
	for _, j := range jobs {
		at, slot := a.byID.find(a.jobs, j.ID)
		if at >= 0 {
			a.findings = append(a.findings, Finding{Rule: aggregate.RuleOneJob, JobID: j.ID,
				Detail: "the job was added to the audit twice"})
			continue
		}
		a.byID.add(slot, len(a.jobs))
		a.jobs = append(a.jobs, j) // within jobs, at or before j's place in it
	}
}

// job is the job added under id, or nil.
func (a *Auditor) job(id string) *Job {
	if at, _ := a.byID.find(a.jobs, id); at >= 0 {
		return &a.jobs[at]
	}
	return nil
}

// Unreadable records a message of the log that is not a readable event
// of the job its subject names.
func (a *Auditor) Unreadable(seq uint64, jobID string, err error) {
	a.events++
	a.findings = append(a.findings, Finding{Rule: RuleReadable, JobID: jobID, Seq: seq, Detail: err.Error()})
}

// Job returns what the audit learnt of a job. Its findings are a copy:
// the report reads the auditor's own.
func (a *Auditor) Job(id string) (Job, bool) {
	j := a.job(id)
	if j == nil {
		return Job{}, false
	}
	out := *j
	out.Findings = slices.Clone(j.Findings)
	return out, true
}

// Report sums everything up. Findings come sorted, so two audits of the
// same data give the same report.
func (a *Auditor) Report() Report {
	r := Report{Now: a.opts.Now.UTC(), Events: a.events, Jobs: len(a.jobs), Statuses: map[aggregate.Status]int{},
		Commands: a.commands, Ledger: a.ledger, Rules: map[string]int{}}
	n := len(a.findings)
	for i := range a.jobs {
		n += len(a.jobs[i].Findings)
	}
	r.Violations = append(make([]Finding, 0, n), a.findings...)
	for i := range a.jobs {
		j := &a.jobs[i]
		r.Statuses[j.Status]++
		if j.Pending != "" {
			r.Pending++
		}
		r.Purchases += j.Purchases.Bought
		if j.Purchases.Doubled > 0 {
			r.DoubleCharges += j.Purchases.Doubled
			r.DoubleChargedJobs = append(r.DoubleChargedJobs, j.ID)
		}
		r.RepurchasesAuthorized += j.Repurchases
		r.Violations = append(r.Violations, j.Findings...)
	}
	slices.Sort(r.DoubleChargedJobs)
	slices.SortStableFunc(r.Violations, func(x, y Finding) int {
		return cmp.Or(cmp.Compare(x.JobID, y.JobID), cmp.Compare(x.Version, y.Version), cmp.Compare(x.Seq, y.Seq),
			cmp.Compare(x.Rule, y.Rule), cmp.Compare(x.Key, y.Key), cmp.Compare(x.Detail, y.Detail))
	})
	for _, f := range r.Violations {
		r.Rules[f.Rule]++
	}
	return r
}

// Summary is a one-line account of a report.
func (r Report) Summary() string {
	verdict := "every promise kept"
	if !r.OK() {
		verdict = fmt.Sprintf("%d violation(s)", len(r.Violations))
	}
	doubles := ""
	if r.DoubleCharges > 0 {
		doubles = fmt.Sprintf(", %d double charges of the API found", r.DoubleCharges)
	}
	return fmt.Sprintf("%d events, %d jobs (%d pending), %d purchases (%d re-purchases authorised%s): %s",
		r.Events, r.Jobs, r.Pending, r.Purchases, r.RepurchasesAuthorized, doubles, verdict)
}
