package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// Report is what a chaos run did and found. Its JSON form is what
// serpent chaos -o json prints.
type Report struct {
	Seed    int64         `json:"seed"`
	Workers int           `json:"workers"`
	Elapsed time.Duration `json:"elapsed_ns"`

	// What was ordered.
	Jobs           int `json:"jobs"`
	Commands       int `json:"commands"`
	Duplicates     int `json:"duplicate_commands"`
	Malformed      int `json:"malformed_commands"`
	Published      int `json:"published"`
	PublishRetries int `json:"publish_retries"`
	// AgedCommands left SERP_COMMANDS by the retention horizon before the
	// checks read it (Config.Retention).
	AgedCommands int `json:"aged_commands,omitempty"`
	// LeftLive counts the jobs that had left the live log when the checks
	// began (Config.Retention).
	LeftLive int `json:"left_live_log,omitempty"`

	// What was done to the processes.
	WorkerKills    int `json:"worker_kills"`
	WorkerRestarts int `json:"worker_restarts"`
	WorkerExits    int `json:"worker_exits"` // ended by themselves
	Pauses         int `json:"pauses"`
	NATSKills      int `json:"nats_kills"`
	NATSStops      int `json:"nats_stops"`
	// FaultsStopped and Quiescent are when the faults stopped and when
	// every job was finished, from the start; Settled is false if some
	// were not within Config.Settle.
	FaultsStopped time.Duration `json:"faults_stopped_ns"`
	Quiescent     time.Duration `json:"quiescent_ns"`
	Settled       bool          `json:"settled"`

	// The provider's side.
	SandboxFaults     map[string]int `json:"sandbox_faults"`
	Requests          int            `json:"requests"`
	Executions        int            `json:"executions"`
	Charges           int            `json:"charges"`
	Replays           int            `json:"replays"`
	InProgress        int            `json:"in_progress"`
	ReplayUnavailable int            `json:"replay_unavailable"`
	Forgotten         int            `json:"forgotten"`

	// serpent's side.
	Events     int            `json:"events"`
	Final      map[string]int `json:"final"`
	Sends      int            `json:"sends"`
	Outcomes   map[string]int `json:"outcomes"`  // by class
	Rotations  map[string]int `json:"rotations"` // new keys, by reason
	Deadlines  int            `json:"deadlines"`
	Reconciled map[string]int `json:"reconciled"` // by verdict
	Rejections map[string]int `json:"rejections"` // by reason

	// The verdict.
	// DuplicateCharges are jobs serpent bought twice (more than one key
	// charged, beyond the authorised re-purchases). APIDoubleCharges are
	// the charges beyond the first the API made under one key, by its
	// books; APIDoublesFound those the jobs' logs found live.
	DuplicateCharges   int            `json:"duplicate_charges"`
	APIDoubleCharges   int            `json:"api_double_charges"`
	APIDoublesFound    int            `json:"api_double_charges_found"`
	UnaccountedCharges int            `json:"unaccounted_charges"`
	OrphanCharges      int            `json:"orphan_charges"`
	LedgerChecked      int            `json:"ledger_entries_checked"`
	Lost               int            `json:"lost_jobs"`
	KnownBugs          map[string]int `json:"known_bugs"`
	Violations         []string       `json:"violations"`
	Checks             []CheckResult  `json:"checks"`

	// Naive is the anti-pattern worker under the same faults.
	Naive *NaiveReport `json:"naive,omitempty"`
}

// OK reports whether every promise held.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

func newReport(cfg Config) *Report {
	return &Report{Seed: cfg.Seed, Workers: cfg.Workers, SandboxFaults: map[string]int{}, Final: map[string]int{},
		Outcomes: map[string]int{}, Rotations: map[string]int{}, Reconciled: map[string]int{},
		Rejections: map[string]int{}, KnownBugs: map[string]int{}, Violations: []string{}}
}

func (r *Report) countCommands(cmds []command) {
	seen := map[string]bool{}
	for _, c := range cmds {
		switch {
		case c.job == "":
			r.Malformed++
		case seen[c.job]:
			r.Duplicates++
		}
		seen[c.job] = true
	}
}

// maxViolations bounds the list; the count goes on.
const maxViolations = 200

func (r *Report) violation(format string, args ...any) {
	if len(r.Violations) == maxViolations {
		r.Violations = append(r.Violations, "... (more violations left out)")
	}
	if len(r.Violations) < maxViolations {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	}
}

// known records a violation, naming the known bug it is, if any.
func (r *Report) known(bug, format string, args ...any) {
	if bug != "" {
		r.KnownBugs[bug]++
		format = "known bug " + bug + ": " + format
	}
	r.violation(format, args...)
}

// tally counts what a job's log shows.
func (r *Report) tally(evs []events.Event) {
	for _, e := range evs {
		switch d := e.Data.(type) {
		case events.Sent:
			r.Sends++
		case events.OutcomeClassified:
			r.Outcomes[d.Class]++
		case events.KeyRotated:
			r.Rotations[d.Reason]++
		case events.DeadlineReached:
			r.Deadlines++
		case events.Reconciled:
			r.Reconciled[d.Verdict]++
		case events.ObservationStored:
			r.Outcomes["success"]++
		case events.JobFailed:
			r.Outcomes["failed:"+d.Reason]++
		}
	}
}

func (r *Report) sandbox(st sandbox.Stats) {
	for k, n := range st.Faults {
		r.SandboxFaults[string(k)] = n
	}
	r.Requests, r.Executions, r.Charges, r.Replays = st.Requests, st.Executions, st.Charges, st.Replays
	r.InProgress, r.ReplayUnavailable, r.Forgotten = st.InProgress, st.ReplayUnavailable, st.Forgotten
}

// WriteTable prints the report as a table of figures.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(name string, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", name, fmt.Sprintf(format, args...))
	}
	sec := func(name string) { fmt.Fprintf(tw, "%s\t\n", strings.ToUpper(name)) }
	sec("ordered")
	row("jobs", "%d (seed %d, %d workers)", r.Jobs, r.Seed, r.Workers)
	row("commands", "%d: %d duplicates, %d malformed (publish retries %d)", r.Commands, r.Duplicates, r.Malformed, r.PublishRetries)
	row("rejections", "%s", counts(r.Rejections))
	sec("faults injected")
	row("worker SIGKILLs", "%d (restarts %d, exits on their own %d)", r.WorkerKills, r.WorkerRestarts, r.WorkerExits)
	row("worker SIGSTOPs", "%d (each past the lease)", r.Pauses)
	row("NATS restarts", "%d (SIGKILL %d, SIGTERM %d)", r.NATSKills+r.NATSStops, r.NATSKills, r.NATSStops)
	row("sandbox faults", "%d: %s", sum(r.SandboxFaults), counts(r.SandboxFaults))
	sec("what happened")
	row("requests", "%d: %d executions, %d replays, %d in progress, %d replay unavailable, %d forgotten",
		r.Requests, r.Executions, r.Replays, r.InProgress, r.ReplayUnavailable, r.Forgotten)
	row("sends (Sent events)", "%d", r.Sends)
	row("retries by kind", "%s", counts(r.Outcomes))
	row("new keys by reason", "%s", counts(r.Rotations))
	row("deadlines reached", "%d", r.Deadlines)
	row("reconciliations", "%s", counts(r.Reconciled))
	row("final states", "%s", counts(r.Final))
	row("charges", "%d", r.Charges)
	row("time", "faults stopped at %s, all finished at %s (within settle: %t), total %s",
		r.FaultsStopped.Round(time.Second), r.Quiescent.Round(time.Second), r.Settled, r.Elapsed.Round(time.Second))
	sec("verdict")
	row("double charges by serpent", "%d", r.DuplicateCharges)
	row("double charges by the API", "%d made, %d found live", r.APIDoubleCharges, r.APIDoublesFound)
	row("unaccounted charges", "%d", r.UnaccountedCharges)
	row("orphan charges", "%d", r.OrphanCharges)
	row("lost jobs", "%d", r.Lost)
	if r.LeftLive > 0 || r.AgedCommands > 0 {
		row("retention", "%d jobs had left the live log when the checks began; %d commands had left %s by its max age", r.LeftLive, r.AgedCommands, "SERP_COMMANDS")
	}
	for _, c := range r.Checks {
		if c.Skipped != "" {
			row("check "+c.Name, "skipped: %s", c.Skipped)
		} else {
			row("check "+c.Name, "%s (%d violations)", c.Summary, len(c.Violations))
		}
	}
	if len(r.KnownBugs) > 0 {
		row("known bugs", "%s", counts(r.KnownBugs))
	}
	row("violations", "%d", len(r.Violations))
	if n := r.Naive; n != nil {
		sec("naive worker (fresh key per delivery), same faults")
		row("jobs", "%d, %d deliveries, %d crashes", n.Jobs, n.Deliveries, n.Crashes)
		row("charged twice or more", "%d jobs (%.1f%%), %d extra charges", n.DuplicateJobs, n.DuplicateRate()*100, n.ExtraCharges)
		row("serpent", "%d jobs charged twice (%.1f%%); the API's own double charges: %d made, %d found live",
			r.DuplicateCharges, pct(r.DuplicateCharges, r.Jobs), r.APIDoubleCharges, r.APIDoublesFound)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, v := range r.Violations {
		fmt.Fprintf(w, "VIOLATION %s\n", v)
	}
	return nil
}

func pct(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return 100 * float64(n) / float64(of)
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
