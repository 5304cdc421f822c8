package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// Report is what one world did and which promises, if any, it broke.
type Report struct {
	Seed    uint64
	Config  string
	Jobs    int
	Cmds    int
	Final   map[aggregate.Status]int
	Events  int
	SimTime time.Duration
	// Expired counts the jobs that had left the live log by the end
	// (Config.Retention).
	Expired int

	// The scheduler's doing.
	Steps, Deliveries, Redeliveries int
	DuplicateDeliveries             int
	ConcurrentDeliveries            int
	Crashes, Restarts, Pauses       int
	LongestPause                    time.Duration
	Injected                        map[string]int // point:verdict
	// Naks counts the deliveries workers asked to have again: a failed
	// step, a wait handed back.
	Naks                             int
	HitHorizon                       bool
	Sends, Executions, Charges       int
	SandboxFaults                    map[sandbox.FaultKind]int
	Outcomes                         map[string]int // by class
	Rotations, Deadlines, Reconciles int
	// DuplicateCharges are jobs serpent bought twice (more than one key
	// charged); APIDoubleCharges the charges beyond the first the API made
	// under one key, by its books; APIDoublesFound those the logs found.
	DuplicateCharges, ChargedNoResult int
	APIDoubleCharges, APIDoublesFound int
	// BodiesChargedTwice counts, by the provider's books alone, the search
	// bodies (one per job) charged more than once, whatever keys did it.
	BodiesChargedTwice int
	// LatePastDeadline is the most a pause held a request past its key's
	// deadline after the engine let it go in time.
	LatePastDeadline time.Duration

	// Digest is a hash of every event and the provider's counters: the
	// same seed gives the same digest.
	Digest string
	// Known counts the broken promises that are known bugs, by bug.
	Known map[string]int
	// Failures lists every broken promise, one line each.
	Failures []string
	// Trace is the story of Config.Trace's job.
	Trace []string
}

func (r *Report) trace(at time.Duration, format string, args ...any) {
	r.Trace = append(r.Trace, fmt.Sprintf("%12s  ", at.Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func newReport(cfg Config) *Report {
	return &Report{Seed: cfg.Seed, Config: describe(cfg), Jobs: cfg.Jobs, Final: map[aggregate.Status]int{},
		Injected: map[string]int{}, Outcomes: map[string]int{}, Known: map[string]int{}}
}

func (r *Report) fail(format string, args ...any) {
	r.Failures = append(r.Failures, fmt.Sprintf(format, args...))
}

// Failed reports whether a promise broke.
func (r *Report) Failed() bool { return len(r.Failures) > 0 }

func describe(c Config) string {
	f := c.Faults
	label := ""
	if c.Label != "" {
		label = c.Label + ": "
	}
	return label + fmt.Sprintf("jobs=%d workers=%dx%d intake=%d ackwait=%s crash=%.3f pause=%.3f store=%.3f/%.3f ledger=%.2f keys=%d age=%s search=%s slow=%s",
		c.Jobs, c.Workers, c.Slots, c.IntakeSlots, c.AckWait, f.Crash, f.Pause, f.StoreFail, f.StoreLost, f.LedgerFail,
		c.Policy.MaxKeys, c.Policy.MaxAge.D(), c.Sandbox.SearchTime, c.Sandbox.SlowSearchTime) + serverAhead(c)
}

func serverAhead(c Config) string {
	if c.ServerAhead == 0 {
		return ""
	}
	return " server+" + c.ServerAhead.String()
}

// String is the report in a few lines.
func (r *Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %s\n", r.Seed, r.Config)
	fmt.Fprintf(&b, "  %d jobs from %d commands, %d events, %s of simulated time; final %s\n",
		r.Jobs, r.Cmds, r.Events, r.SimTime.Round(time.Second), counts(r.Final))
	fmt.Fprintf(&b, "  %d scheduler steps, %d deliveries (%d redelivered, %d duplicated, %d concurrent, %d asked again), %d crashes, %d restarts, %d pauses (longest %s)\n",
		r.Steps, r.Deliveries, r.Redeliveries, r.DuplicateDeliveries, r.ConcurrentDeliveries, r.Naks, r.Crashes, r.Restarts, r.Pauses, r.LongestPause.Round(time.Second))
	fmt.Fprintf(&b, "  injected %s; sandbox faults %s\n", counts(r.Injected), counts(r.SandboxFaults))
	fmt.Fprintf(&b, "  %d requests, %d executions, %d charges, %d double charges by serpent, %d by the API (%d found live); outcomes %s; %d rotations, %d deadlines, %d reconciliations\n",
		r.Sends, r.Executions, r.Charges, r.DuplicateCharges, r.APIDoubleCharges, r.APIDoublesFound, counts(r.Outcomes), r.Rotations, r.Deadlines, r.Reconciles)
	if len(r.Known) > 0 {
		fmt.Fprintf(&b, "  KNOWN BUGS %s\n", counts(r.Known))
	}
	for _, f := range r.Failures {
		fmt.Fprintf(&b, "  FAIL %s\n", f)
	}
	for _, l := range r.Trace {
		fmt.Fprintf(&b, "  | %s\n", l)
	}
	return b.String()
}

func counts[K ~string](m map[K]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
