package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/store"
)

// Follow feeds t from SERP_EVENTS, from the event after t.Seq(), until ctx
// ends. It reads with an ordered consumer (ephemeral, recreated by the
// client after a disconnect or a missed heartbeat, resuming where it
// stopped), so it needs only read access to the stream; a stream that is
// not there yet is waited for. When t forgets finished jobs, a job's
// earlier events are loaded (with direct gets) for the rare event that
// comes after it finished; a load that fails is tried again, from that
// event. log may be nil.
func Follow(ctx context.Context, js jetstream.JetStream, t *Tally, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &follower{js: js, t: t, log: log}
	retry := 100 * time.Millisecond
	for ctx.Err() == nil {
		before := t.Seq()
		err := f.read(ctx)
		if ctx.Err() != nil {
			return
		}
		if t.Seq() > before {
			retry = 100 * time.Millisecond
		}
		log.Debug("metrics: reading the event log failed; trying again", "err", err, "retry_in", retry)
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
		retry = min(2*retry, 5*time.Second)
	}
}

// follower reads the log into a tally.
type follower struct {
	js    jetstream.JetStream
	t     *Tally
	log   *slog.Logger
	store *snats.EventStore // made when first needed
}

// read feeds the tally until the consumer fails, a job's history cannot
// be loaded, or ctx ends.
func (f *follower) read(ctx context.Context) error {
	return snats.TailEvents(ctx, f.js, f.t.Seq(), func(m jetstream.Msg) error { return f.apply(ctx, m) })
}

// apply decodes one message of the log into the tally. A message that is
// not an event, or not one of the job whose subject it is on (stored
// under another id or type), is counted as undecodable: the projector,
// the audit and the store take it for a corrupt one too.
func (f *follower) apply(ctx context.Context, m jetstream.Msg) error {
	meta, err := m.Metadata()
	if err != nil {
		return nil
	}
	r, err := projector.DecodeEvent(snats.EventSubjectPrefix, projector.Message{
		Seq: meta.Sequence.Stream, Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}, true)
	if err != nil {
		f.t.Undecodable(meta.Sequence.Stream)
		return nil
	}
	e := r.Event
	if f.t.Apply(r) {
		return nil
	}
	history, err := f.history(ctx, e.JobID)
	if err != nil {
		return err
	}
	f.t.ApplyWithHistory(r, history)
	return nil
}

// history loads a job's events. A job whose events cannot be read (one
// of them is corrupt, counted as undecodable where it stands, or its id
// is not one a job can have) comes back as nothing, with a warning,
// rather than holding the tally up for good.
func (f *follower) history(ctx context.Context, jobID string) ([]events.Event, error) {
	if f.store == nil {
		s, err := snats.NewEventStore(ctx, f.js, snats.EventStoreOptions{})
		if err != nil {
			return nil, err
		}
		f.store = s
	}
	evs, _, err := f.store.Load(ctx, jobID)
	var corrupt *store.CorruptError
	if errors.As(err, &corrupt) || errors.Is(err, store.ErrInvalid) {
		f.log.Warn("metrics: a finished job's events cannot be read; counting its new event as if it had none",
			"job", jobID, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: load job %s: %w", jobID, err)
	}
	return evs, nil
}
