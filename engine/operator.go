package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/eventstore"
)

// Cancel stops a job that is not finished. A job with a request in flight
// is refused with aggregate.ErrLeased: cancel it once the lease ends.
func (e *Engine) Cancel(ctx context.Context, jobID, by, reason string) (aggregate.State, error) {
	return e.operate(ctx, jobID, aggregate.Cancel{By: by, Reason: reason})
}

// Repurchase authorises buying again a charged_no_result job, recorded as a
// deliberate decision, and wakes the job with its new key. seen, when not
// nil, is the number of re-purchases the job had when the operator decided:
// a repeat of the request once the job has more authorises nothing and
// answers the job's state (see aggregate.AuthorizeRepurchase).
func (e *Engine) Repurchase(ctx context.Context, jobID, by, reason string, seen *int) (aggregate.State, error) {
	return e.operate(ctx, jobID, aggregate.AuthorizeRepurchase{By: by, Reason: reason, Seen: seen})
}

// operate decides and appends an operator input, deciding again if the job
// moved meanwhile, then arms the job's timer for whatever comes next.
func (e *Engine) operate(ctx context.Context, jobID string, in aggregate.Input) (aggregate.State, error) {
	for round := 0; round < maxRounds; round++ {
		evs, ver, err := e.cfg.Store.Load(ctx, jobID)
		if err != nil {
			return aggregate.State{}, fmt.Errorf("load job %s: %w", jobID, err)
		}
		s := aggregate.Fold(evs)
		out, err := e.decider.Decide(s, in, e.cfg.Now(), e.cfg.IDs)
		if err != nil {
			return s, err
		}
		if len(out) == 0 {
			return s, nil // done before: nothing to write
		}
		if _, ok := in.(aggregate.AuthorizeRepurchase); ok && s.RepurchaseTooLate(e.cfg.Now(), e.cfg.SkewMargin) {
			return s, fmt.Errorf("%w: job %s leaves the live log at %s, before a re-purchase's age budget (%s) and the clock skew margin (%s) would end; it cannot be bought again",
				aggregate.ErrNotAllowed, jobID, s.Expires().Format(time.RFC3339), s.Policy.MaxAge.D(), e.cfg.SkewMargin)
		}
		if _, err = e.cfg.Store.Append(expiring(ctx, s), jobID, ver, out...); errors.Is(err, eventstore.ErrConcurrency) {
			continue
		} else if err != nil {
			return s, fmt.Errorf("job %s: %w", jobID, err)
		}
		for _, ev := range out {
			s = aggregate.Apply(s, ev)
		}
		e.jobLog(jobID, s).Info("operator action", "action", fmt.Sprintf("%T", in), "status", s.Status)
		if next := s.Next(e.cfg.Now()); next.Step != aggregate.StepDone {
			if err := e.cfg.Timers.Arm(ctx, jobID, next.At); err != nil {
				return s, fmt.Errorf("job %s: arm timer: %w", jobID, err)
			}
		}
		return s, nil
	}
	return aggregate.State{}, fmt.Errorf("job %s: kept changing; try again", jobID)
}
