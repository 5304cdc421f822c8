package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	snats "github.com/serpent-engine/serpent/nats"
)

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
// SweepJobs (metrics.Tally.Live makes one, JobsOf another).
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
// jobs in flight, as a fold of the log says (metrics.Tally.Live): reading
// the last event of every job instead would take, at millions of jobs,
// longer than the server's requests may, holding its other requests
// meanwhile. A job of ids that has finished since is left as it is.
// Which jobs have a timer or a due message it reads from the work stream's
// index of subjects, and it looks up one by one only the others.
func (e *Engine) SweepJobs(ctx context.Context, js jetstream.JetStream, ids JobList) (SweepReport, error) {
	n := ids.Len()
	rep := SweepReport{Jobs: n, Live: n}
	work, err := js.Stream(ctx, snats.WorkStream)
	if err != nil {
		return rep, fmt.Errorf("sweep: %w", err)
	}
	armed := e.armed(ctx, js, ids)
	for i := range n {
		if armed[i] {
			continue
		}
		if err := e.sweepJob(ctx, work, ids.ID(i), &rep); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// armed marks the jobs of ids that have a timer or a due message, as the
// work stream's index of subjects says, read in a few requests that load
// no message: a look-up per job costs a round trip, and the server a
// block read, for each of millions of jobs waiting for their slots. Those
// not marked are looked at one by one (sweepJob), as is every job if the
// index cannot be read.
func (e *Engine) armed(ctx context.Context, js jetstream.JetStream, ids JobList) []bool {
	armed := make([]bool, ids.Len())
	for _, prefix := range []string{snats.TimerSubjectPrefix, snats.WorkSubjectPrefix} {
		err := snats.EachSubject(ctx, js, snats.WorkStream, prefix+">", func(subject string) {
			if k, ok := ids.Index(strings.TrimPrefix(subject, prefix)); ok {
				armed[k] = true
			}
		})
		if err != nil {
			// The marks so far are right: a timer seen is there.
			e.log.Warn("sweep: the work stream's subjects could not be read; looking at each job's timer", "err", err)
			break
		}
	}
	return armed
}

// sweepJob arms a job's timer again from its state if it has neither a
// timer nor a due message, counting it in rep. A job whose events cannot
// be read (corrupt, or an id no job can have) is counted unusable and
// left, so that the jobs after it are still swept.
func (e *Engine) sweepJob(ctx context.Context, work jetstream.Stream, jobID string, rep *SweepReport) error {
	if err := events.ValidateJobID(jobID); err != nil {
		rep.Unusable++
		e.log.Warn("sweep: not a job id; left as it is", "job", jobID, "err", err)
		return nil
	}
	armed, err := hasWake(ctx, work, jobID)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if armed {
		return nil
	}
	rearmed, held, err := e.rearm(ctx, work, jobID)
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

// hasWake reports whether a job has a timer or a due message waiting.
func hasWake(ctx context.Context, work jetstream.Stream, jobID string) (bool, error) {
	return hasMessage(ctx, work, snats.TimerSubjectPrefix+jobID, snats.WorkSubjectPrefix+jobID)
}

// hasMessage reports whether the stream holds a message on any of subjects.
func hasMessage(ctx context.Context, work jetstream.Stream, subjects ...string) (bool, error) {
	for _, subj := range subjects {
		_, err := work.GetLastMsgForSubject(ctx, subj)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, err
		}
	}
	return false, nil
}

// rearm arms a job's timer from its state, and reports whether it did (a
// finished job has none to arm) and whether the job was claimed under a
// lease that has not ended (SweepReport.Held).
func (e *Engine) rearm(ctx context.Context, work jetstream.Stream, jobID string) (rearmed, held bool, err error) {
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
		if armed, err := hasWake(ctx, work, jobID); err != nil || armed {
			return false, false, err
		}
		e.jobLog(jobID, s).Debug("sweep: the job is claimed and its lease runs; arming its timer at the lease's end in case its worker died",
			"worker", s.Lease.Worker, "at", next.At)
	} else {
		e.jobLog(jobID, s).Warn("sweep: the job had no timer; arming it again", "at", next.At)
	}
	return true, held, e.cfg.Timers.Arm(ctx, jobID, next.At)
}
