package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// Load returns the job's events in order and its version, (nil, 0, nil)
// for a job without events or one leaving the log (eventstore.Gone). It reads with batched direct gets filtered by
// the job's subject, LoadBatch messages per request, until the server says
// nothing is pending. An unreadable event is a *eventstore.CorruptError.
func (s *EventStore) Load(ctx context.Context, jobID string) ([]events.Event, uint64, error) {
	if err := events.ValidateJobID(jobID); err != nil {
		return nil, 0, fmt.Errorf("%w: %w", eventstore.ErrInvalid, err)
	}
	subj := s.subject(jobID)
	var (
		evs     []events.Event
		version uint64
	)
	for {
		msgs, err := jetstreamext.GetBatch(ctx, s.js, s.opts.Stream, s.opts.LoadBatch,
			jetstreamext.GetBatchSubject(subj), jetstreamext.GetBatchSeq(version+1))
		if err != nil {
			return nil, 0, fmt.Errorf("nats: load job %s: %w", jobID, err)
		}
		n, pending, none := 0, -1, false
		for m, err := range msgs {
			if errors.Is(err, jetstreamext.ErrNoMessages) {
				none = true
				break
			}
			if err != nil {
				return nil, 0, fmt.Errorf("nats: load job %s after version %d: %w", jobID, version, err)
			}
			if m.Subject != subj {
				return nil, 0, &eventstore.CorruptError{JobID: jobID, Seq: m.Sequence, Err: fmt.Errorf("direct get returned subject %s", m.Subject)}
			}
			got, err := eventstore.DecodeMessage(jobID, m.Sequence, m.Header, m.Data)
			if err != nil {
				return nil, 0, err
			}
			evs = append(evs, got...)
			version = m.Sequence
			n++
			pending = -1
			if p, err := strconv.Atoi(m.Header.Get("Nats-Num-Pending")); err == nil {
				pending = p
			}
		}
		// A batch can also end early at the server's byte limit, so only
		// "nothing pending" or an empty batch ends the job.
		if none || pending == 0 || pending < 0 && n > 0 && n < s.opts.LoadBatch {
			if eventstore.Gone(evs) {
				return nil, 0, nil // the job is leaving the log: its head expired
			}
			return evs, version, nil
		}
		if n == 0 {
			// The batch's answers end quietly when the request times out
			// (jetstreamext.GetBatch): no message and no "none" is no
			// answer, not the end of the job.
			if err := ctx.Err(); err != nil {
				return nil, 0, fmt.Errorf("nats: load job %s after version %d: %w", jobID, version, err)
			}
			return nil, 0, fmt.Errorf("nats: load job %s after version %d: no answer in time", jobID, version)
		}
	}
}

// LeaderVersion is the job's version as the stream's leader has it,
// read with the leader's message-get API rather than a direct get, which
// on a cluster any replica may answer from behind.
func (s *EventStore) LeaderVersion(ctx context.Context, jobID string) (uint64, error) {
	if err := events.ValidateJobID(jobID); err != nil {
		return 0, fmt.Errorf("%w: %w", eventstore.ErrInvalid, err)
	}
	m, err := s.leaderGet(ctx, msgGetRequest{LastFor: s.subject(jobID)})
	if err != nil || m == nil {
		return 0, err
	}
	return m.Sequence, nil
}
