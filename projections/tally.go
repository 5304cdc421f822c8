package projections

import (
	"math"
	"sync"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
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
	c    TallyCounts
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

// NewTally returns an empty tally.
func NewTally() *Tally {
	return &Tally{jobs: map[hexID]packedJob{}, wide: map[string]jobTally{}, c: TallyCounts{
		Jobs: map[aggregate.Status]int{}, Events: map[string]uint64{}, Sends: map[string]uint64{},
		Rotations: map[string]uint64{}, Reconciliations: map[string]uint64{}, Checks: map[string]uint64{},
	}}
}

// Log is the creation time of the event log t counts, zero until known
// (its reader, CountsLog and RestoreCheckpoint tell it).
func (t *Tally) Log() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.log
}

// CountsLog reports whether t counts the log made at created: it takes
// that log for its own if it knows of none yet.
func (t *Tally) CountsLog(created time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.log.IsZero() {
		t.log = created
	}
	return t.log.Equal(created)
}

// Reset makes t a tally that has applied nothing, of no log yet, as
// NewTally made it (ForgetFinished stays as set).
func (t *Tally) Reset() {
	n := NewTally()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq, t.ver, t.jobs, t.wide, t.c = 0, 0, n.jobs, n.wide, n.c
	t.recent, t.doubled, t.reconciling, t.end, t.caughtUp, t.log = nil, nil, nil, 0, false, time.Time{}
}

// ForgetFinished makes t let every job go once it is finished, and
// returns t. Call it before the first record. Whoever feeds t must then
// give a finished job's earlier events with its next event (see Apply);
// the fold of nats/projector does.
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
// whoever reads it makes sure it holds every version before r's (the
// fold of nats/projector reads a short one again).
func (t *Tally) ApplyWithHistory(r Record, history []events.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.apply(r, history, true)
}

// CatchUpTo tells t where the log ended when its reader began: t is
// caught up (TallyCounts.CaughtUp) once it has applied everything up to
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
func (t *Tally) Apply(r Record) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.apply(r, nil, false)
}

// apply adds r, unless its job was let go and there is no history to find
// where it stood; with one, a job t does not hold starts from there.
func (t *Tally) apply(r Record, history []events.Event, withHistory bool) bool {
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

// Undecodable counts a message of the log that is not an event.
func (t *Tally) Undecodable(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if seq > t.seq {
		t.advance(seq, math.MaxUint64)
		t.c.Undecodable++
	}
}
