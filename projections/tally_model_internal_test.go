package projections

import (
	"slices"
	"sort"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// modelTally is the Tally as it was before it packed its jobs: a pointer
// to a struct of every field per job. It is the model the property test
// holds the Tally to; keep it simple rather than fast.
type modelTally struct {
	seq         uint64
	jobs        map[string]*modelJob
	c           TallyCounts
	recent      []string
	reconciling map[string]*modelJob
}

type modelJob struct {
	status      aggregate.Status
	reconcile   string
	since       time.Time
	purchases   int
	repurchases int
	apiDoubles  int
	checking    bool
	charges     map[string]bool // aggregate.ChargeID of the charges found
}

func (j *modelJob) doubled() bool { return j.purchases > 1+j.repurchases }

func newModelTally() *modelTally {
	return &modelTally{jobs: map[string]*modelJob{}, reconciling: map[string]*modelJob{}, c: TallyCounts{
		Jobs: map[aggregate.Status]int{}, Events: map[string]uint64{}, Sends: map[string]uint64{},
		Rotations: map[string]uint64{}, Reconciliations: map[string]uint64{}, Checks: map[string]uint64{},
	}}
}

func (t *modelTally) Apply(r Record) {
	if r.Seq <= t.seq {
		return
	}
	t.seq = r.Seq
	e := r.Event
	j := t.jobs[e.JobID]
	if j == nil {
		j = &modelJob{}
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
			n := 0 // charges not seen before, as aggregate.Purchases counts
			for _, en := range d.Entries {
				if !j.charges[aggregate.ChargeID(en)] {
					if j.charges == nil {
						j.charges = map[string]bool{}
					}
					j.charges[aggregate.ChargeID(en)] = true
					n++
				}
			}
			if len(d.Entries) == 0 {
				n = 1 // a charge recorded without its entry
			}
			t.c.Purchases += uint64(n)
			j.purchases += n
		}
		for _, en := range d.Entries {
			if d.Verdict == aggregate.VerdictCharged {
				t.c.ChargedPages += uint64(max(en.BilledPages, 0))
			}
		}
	case events.ObservationStored:
		t.c.Sends[string(aggregate.ClassSuccess)]++
		t.c.Purchases++
		t.c.ResultPages += uint64(max(d.Pages, 0))
		j.purchases++
	case events.JobFailed:
		if d.Reason == aggregate.ReasonAPIError {
			t.c.Sends[string(aggregate.ClassFailure)]++
		}
	case events.RepurchaseAuthorized:
		j.repurchases++
	case events.ChargesChecked:
		t.c.Checks[d.Verdict]++
		n := 0 // distinct charges: the first is the stored key's purchase
		seen := map[string]bool{}
		for _, en := range d.Entries {
			if !seen[aggregate.ChargeID(en)] {
				seen[aggregate.ChargeID(en)] = true
				n++
			}
		}
		if n > 1 {
			if j.apiDoubles == 0 {
				t.c.APIDoubleJobs++
			}
			j.apiDoubles += n - 1
			t.c.APIDoubleCharges += n - 1
			t.c.Purchases += uint64(n - 1)
		}
	}
	if now := j.doubled(); now != wasDoubled {
		if now {
			t.c.DoubleCharges++
		} else {
			t.c.DoubleCharges--
		}
	}
	s := aggregate.Apply(aggregate.State{Status: j.status, Reconcile: j.reconcile, CheckPending: j.checking}, e)
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
	j.status, j.reconcile, j.checking = s.Status, s.Reconcile, s.CheckPending
	if i := slices.Index(t.recent, e.JobID); i >= 0 {
		t.recent = slices.Delete(t.recent, i, i+1)
	}
	t.recent = slices.Insert(t.recent, 0, e.JobID)
	if len(t.recent) > RecentJobs {
		t.recent = t.recent[:RecentJobs]
	}
}

func (t *modelTally) Undecodable(seq uint64) {
	if seq > t.seq {
		t.seq = seq
		t.c.Undecodable++
	}
}

func (t *modelTally) Counts() TallyCounts {
	c := t.c
	c.Seq = t.seq
	c.Jobs = cloneMap(t.c.Jobs)
	c.Events, c.Sends = cloneMap(t.c.Events), cloneMap(t.c.Sends)
	c.Rotations, c.Reconciliations, c.Checks = cloneMap(t.c.Rotations), cloneMap(t.c.Reconciliations), cloneMap(t.c.Checks)
	for _, s := range aggregate.Statuses() {
		c.Jobs[s] += 0
	}
	return c
}

func (t *modelTally) Recent() []string { return slices.Clone(t.recent) }

func (t *modelTally) Reconciling(limit int) ([]Reconciling, int) {
	var out []Reconciling
	for id, j := range t.reconciling {
		out = append(out, Reconciling{JobID: id, Reason: j.reconcile, Since: j.since})
	}
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
