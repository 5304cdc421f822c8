package nats

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// Append writes evs to jobID's subject if the job's version is expected,
// all or none, and returns the new version. The package documentation
// describes how every answer of the server is mapped.
func (s *EventStore) Append(ctx context.Context, jobID string, expected uint64, evs ...events.Event) (uint64, error) {
	msgs, err := s.prepare(jobID, expected, evs, eventstore.Expiry(ctx))
	if err != nil {
		return 0, err
	}
	return s.write(ctx, jobID, expected, msgs)
}

// prepare checks an append and encodes it, with the TTL that makes its
// messages leave at expires (none when zero); nothing is sent.
func (s *EventStore) prepare(jobID string, expected uint64, evs []events.Event, expires time.Time) ([]eventstore.Message, error) {
	if len(evs) > s.opts.MaxBatch {
		return nil, fmt.Errorf("%w: %d events for job %s, an atomic append takes at most %d", eventstore.ErrInvalid, len(evs), jobID, s.opts.MaxBatch)
	}
	msgs, err := eventstore.EncodeAppend(jobID, expected, evs)
	if err != nil {
		return nil, err
	}
	msgs = eventstore.Pack(msgs, s.MaxMessageSize())
	eventstore.SetTTL(msgs, expected, expires, time.Now())
	if err := eventstore.CheckSize(jobID, msgs, s.MaxMessageSize()); err != nil {
		return nil, err
	}
	return msgs, nil
}

// write publishes one job's prepared append until its outcome is known.
func (s *EventStore) write(ctx context.Context, jobID string, expected uint64, msgs []eventstore.Message) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return s.settle(ctx, jobID, expected, msgs, nil)
}

// answer is what one publish of an append told, before any re-read.
type answer struct {
	seq uint64
	out outcome
	err error
}

// settle takes an append from the answer to its first publish (first; nil
// to publish it now) to its outcome: re-reading the job when the answer
// does not settle it, publishing again while that stays unclear.
func (s *EventStore) settle(ctx context.Context, jobID string, expected uint64, msgs []eventstore.Message, first *answer) (uint64, error) {
	wire := wireMsgs(s.subject(jobID), msgs)
	for attempt := 1; ; attempt++ {
		var seq uint64
		var out outcome
		var err error
		if attempt == 1 && first != nil {
			seq, out, err = first.seq, first.out, first.err
		} else {
			actx, cancel := context.WithTimeout(ctx, s.opts.AttemptTimeout)
			seq, out, err = s.publish(actx, wire)
			cancel()
		}
		switch out {
		case written:
			return seq, nil
		case failed:
			return 0, fmt.Errorf("nats: append of %d events to job %s: %w", len(msgs), jobID, err)
		}
		if errors.Is(err, natsgo.ErrConnectionClosed) {
			// Nothing can read the log to tell on a closed connection.
			return 0, fmt.Errorf("%w: append of %d events to job %s at version %d: %w",
				eventstore.ErrUnknownOutcome, len(msgs), jobID, expected, err)
		}
		actx, cancel := context.WithTimeout(ctx, s.opts.AttemptTimeout)
		v, state, rerr := s.resolve(actx, jobID, expected, msgs)
		cancel()
		if rerr == nil {
			switch {
			case state == landed:
				if out != duplicate || attempt > 1 {
					s.log.Debug("nats: append had landed", "job", jobID, "version", v, "attempt", attempt, "answer", err)
				}
				return v, nil
			case state == moved:
				return 0, fmt.Errorf("%w: job %s moved past version %d (%v)", eventstore.ErrConcurrency, jobID, expected, err)
			case out == duplicate:
				return 0, fmt.Errorf("%w: an event of the append to job %s at version %d is already in the log elsewhere (%v)", eventstore.ErrDuplicate, jobID, expected, err)
			}
		}
		last := errors.Join(err, rerr)
		if ctx.Err() != nil || attempt >= s.opts.MaxAttempts {
			return 0, fmt.Errorf("%w: append of %d events to job %s at version %d, %d attempts: %w",
				eventstore.ErrUnknownOutcome, len(msgs), jobID, expected, attempt, errors.Join(last, ctx.Err()))
		}
		s.log.Debug("nats: append unsettled, retrying", "job", jobID, "attempt", attempt, "answer", last)
		if err := s.pause(ctx, attempt); err != nil {
			return 0, fmt.Errorf("%w: append of %d events to job %s at version %d, %d attempts: %w",
				eventstore.ErrUnknownOutcome, len(msgs), jobID, expected, attempt, errors.Join(last, err))
		}
	}
}

// pause waits before attempt+1: RetryBackoff doubled per attempt, up to a
// second, with jitter so racing writers spread out.
func (s *EventStore) pause(ctx context.Context, attempt int) error {
	d := s.opts.RetryBackoff << min(attempt-1, 10)
	d = min(d, time.Second)
	d = d/2 + rand.N(d/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
