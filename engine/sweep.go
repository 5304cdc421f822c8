package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// Wakes says which jobs have a wake-up waiting: a timer armed, or a due
// wake-up not taken yet (package nats reads SERP_WORK).
type Wakes interface {
	// EachWaiting calls each with every job that has a wake-up waiting,
	// as far as it can read them: an error says it could not read them
	// all, not that the jobs it named have none.
	EachWaiting(ctx context.Context, each func(jobID string)) error
	// Waiting reports whether one job has a wake-up waiting.
	Waiting(ctx context.Context, jobID string) (bool, error)
}

// SweepReport counts what a sweep saw.
type SweepReport struct {
	// Jobs are the jobs looked at, those SweepJobs was given. Live are
	// those taken to be in flight (all it was given), Rearmed those whose timer was armed
	// again, Unusable those whose events could not be read. Held are the
	// rearmed jobs claimed under a lease that had not ended: a worker
	// sending them arms their timer when it is done, so they were most
	// likely not lost (their timer is armed at the lease's end all the
	// same, in case that worker died).
	Jobs     int `json:"jobs"`
	Live     int `json:"live"`
	Rearmed  int `json:"rearmed"`
	Held     int `json:"held"`
	Unusable int `json:"unusable"`
}

// JobList is a list of job ids, as the jobs in flight are given to
// SweepJobs (projections.Tally.Live makes one, JobsOf another).
type JobList interface {
	// Len is how many jobs there are; ID the id of job i, for i from 0
	// to Len()-1.
	Len() int
	ID(i int) string
	// Index is the place of id in the list, if it is there.
	Index(id string) (int, bool)
}

// JobsOf is a JobList of the given ids.
func JobsOf(ids []string) JobList {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	return sortedIDs(sorted)
}

type sortedIDs []string

func (s sortedIDs) Len() int                    { return len(s) }
func (s sortedIDs) ID(i int) string             { return s[i] }
func (s sortedIDs) Index(id string) (int, bool) { return slices.BinarySearch(s, id) }

// SweepJobs re-arms timers that were lost for any reason (a purged work
// stream, a bug, an operator's mistake): every job of ids that has neither
// a timer nor a due message is armed again from its state. ids are the
// jobs in flight, as a fold of the log says (projections.Tally.Live): reading
// the last event of every job instead would take, at millions of jobs,
// longer than the server's requests may, holding its other requests
// meanwhile. A job of ids that has finished since is left as it is.
// Which jobs have a wake-up waiting it reads from wakes all at once
// (EachWaiting), and it looks up one by one only the others.
func (e *Engine) SweepJobs(ctx context.Context, wakes Wakes, ids JobList) (SweepReport, error) {
	n := ids.Len()
	rep := SweepReport{Jobs: n, Live: n}
	armed := e.armed(ctx, wakes, ids)
	for i := range n {
		if armed[i] {
			continue
		}
		if err := e.sweepJob(ctx, wakes, ids.ID(i), &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// armed marks the jobs of ids that have a wake-up waiting, as wakes lists
// them all at once: a look-up per job costs a round trip, and the server
// a block read, for each of millions of jobs waiting for their slots.
// Those not marked are looked at one by one (sweepJob), as is every job
// the list could not name.
func (e *Engine) armed(ctx context.Context, wakes Wakes, ids JobList) []bool {
	armed := make([]bool, ids.Len())
	err := wakes.EachWaiting(ctx, func(jobID string) {
		if k, ok := ids.Index(jobID); ok {
			armed[k] = true
		}
	})
	if err != nil {
		// The marks so far are right: a timer seen is there.
		e.log.Warn("sweep: the wake-ups could not all be listed; looking at each job's", "err", err)
	}
	return armed
}

// sweepJob arms a job's timer again from its state if it has neither a
// timer nor a due message, counting it in rep. A job whose events cannot
// be read (corrupt, or an id no job can have) is counted unusable and
// left, so that the jobs after it are still swept.
func (e *Engine) sweepJob(ctx context.Context, wakes Wakes, jobID string, rep *SweepReport) error {
	if err := events.ValidateJobID(jobID); err != nil {
		rep.Unusable++
		e.log.Warn("sweep: not a job id; left as it is", "job", jobID, "err", err)
		return nil
	}
	armed, err := wakes.Waiting(ctx, jobID)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if armed {
		return nil
	}
	rearmed, held, err := e.rearm(ctx, wakes, jobID)
	var corrupt *eventstore.CorruptError
	switch {
	case errors.As(err, &corrupt) || errors.Is(err, eventstore.ErrInvalid):
		rep.Unusable++
		e.log.Warn("sweep: the job's events cannot be read; its timer is left as it is", "job", jobID, "err", err)
		return nil
	case err != nil:
		return err
	case rearmed:
		rep.Rearmed++
		if held {
			rep.Held++
		}
	}
	return nil
}

// rearm arms a job's timer from its state, and reports whether it did (a
// finished job has none to arm) and whether the job was claimed under a
// lease that has not ended (SweepReport.Held).
func (e *Engine) rearm(ctx context.Context, wakes Wakes, jobID string) (rearmed, held bool, err error) {
	s, err := e.State(ctx, jobID)
	if err != nil {
		return false, false, err
	}
	now := e.cfg.Now()
	next := s.Next(now)
	if next.Step == aggregate.StepDone {
		return false, false, nil
	}
	held = s.Status == aggregate.StatusSending && now.Before(s.Lease.Until)
	if held {
		// Its worker arms its timer once the outcome is stored, which
		// may have happened since the look above: a timer armed here at
		// the lease's end would replace an earlier one it armed.
		if armed, err := wakes.Waiting(ctx, jobID); err != nil || armed {
			return false, false, err
		}
		e.jobLog(jobID, s).Debug("sweep: the job is claimed and its lease runs; arming its timer at the lease's end in case its worker died",
			"worker", s.Lease.Worker, "at", next.At)
	} else {
		e.jobLog(jobID, s).Warn("sweep: the job had no timer; arming it again", "at", next.At)
	}
	return true, held, e.cfg.Timers.Arm(ctx, jobID, next.At)
}
