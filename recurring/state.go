package recurring

import (
	"slices"
	"time"
)

// History keeps the latest fired slots of a schedule.
const History = 50

// Fired is one slot a schedule fired and the job it ordered.
type Fired struct {
	Slot  time.Time `json:"slot"`
	JobID string    `json:"job_id"`
}

// State is what a schedule remembers between firings.
type State struct {
	Paused bool `json:"paused"`
	// PausedAt is when a paused schedule was paused: slots due before it
	// are caught up when it resumes, those after it skipped. (Zero in a
	// state stored before it was kept: then all are skipped.)
	PausedAt time.Time `json:"paused_at,omitzero"`
	Created  time.Time `json:"created_at"`
	LastSlot time.Time `json:"last_slot,omitzero"`
	NextSlot time.Time `json:"next_slot,omitzero"`
	Skipped  int       `json:"skipped"`
	Recent   []Fired   `json:"recent,omitempty"`
	// Pending are slots recorded as fired whose commands may not be
	// published yet: a firing records its slots first and publishes them
	// after, so a pause or delete that wins the write orders nothing.
	Pending []Fired `json:"pending,omitempty"`
}

// Plan is what one firing at time now does.
type Plan struct {
	// Fire are the slots to order now, oldest first.
	Fire []time.Time
	// Skipped counts missed slots the catch-up policy skips.
	Skipped int
	// Next is the slot to wake for next; zero when the schedule is over.
	Next time.Time
}

// Due plans a firing: every slot after the last one fired (or from the
// start) up to now is due; the catch-up policy picks which of them fire.
// A schedule that never fired before starts from its creation, so creating
// one does not order slots from the past unless its start says so.
func Due(d Definition, spec Spec, st State, now time.Time) Plan {
	from := st.LastSlot
	if from.IsZero() {
		from = st.Created
		if !d.Start.IsZero() {
			from = d.Start.Add(-time.Nanosecond)
		}
	}
	var due []time.Time
	missed := 0
	for t := spec.Next(from); !t.IsZero() && !t.After(now); t = spec.Next(t) {
		if !d.End.IsZero() && !t.Before(d.End) {
			break
		}
		if !d.Start.IsZero() && t.Before(d.Start) {
			continue
		}
		due = append(due, t)
		if len(due) > MaxCatchUp+1 {
			due = due[1:]
			missed++
		}
	}
	keep := 1
	if d.CatchUp.Policy == CatchUpFire {
		keep = d.CatchUp.Limit + 1 // the missed slots, and the current one
	}
	p := Plan{}
	if len(due) > keep {
		missed += len(due) - keep
		due = due[len(due)-keep:]
	}
	p.Fire, p.Skipped = due, missed
	last := from
	if len(due) > 0 {
		last = due[len(due)-1]
	}
	if n := spec.Next(maxTime(last, now)); !n.IsZero() && (d.End.IsZero() || n.Before(d.End)) {
		p.Next = n
	}
	return p
}

// Apply records a firing in the state. The slots it fires are pending
// until their commands are published (Published).
func (st State) Apply(p Plan, jobs []string) State {
	st.Recent = slices.Clone(st.Recent)
	st.Pending = slices.Clone(st.Pending)
	for i, slot := range p.Fire {
		st.LastSlot = slot
		f := Fired{Slot: slot, JobID: jobs[i]}
		st.Recent = append(st.Recent, f)
		st.Pending = append(st.Pending, f)
	}
	if len(st.Recent) > History {
		st.Recent = st.Recent[len(st.Recent)-History:]
	}
	st.Skipped += p.Skipped
	st.NextSlot = p.Next
	return st
}

// Published records that the commands of these pending slots are
// published; other pending slots (a later firing's) stay.
func (st State) Published(done []Fired) State {
	st.Pending = slices.DeleteFunc(slices.Clone(st.Pending), func(f Fired) bool {
		return slices.ContainsFunc(done, func(d Fired) bool { return d.Slot.Equal(f.Slot) && d.JobID == f.JobID })
	})
	if len(st.Pending) == 0 {
		st.Pending = nil
	}
	return st
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
