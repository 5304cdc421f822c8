package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

// FollowTally feeds t from SERP_EVENTS, from the message at t.Seq() (what
// of it was counted is skipped), until ctx ends: the fold of the log an
// engine keeps for its /metrics, its status page and its sweep for lost
// timers. It follows the log with its one reader (snats.Log.Follow: an
// ordered consumer, made again by the client after a disconnect or a
// missed heartbeat), so it needs only read access to the stream; a
// stream that is not there yet is waited for. When t forgets finished
// jobs, a job's earlier events are loaded (with direct gets) for the rare
// event that comes after it finished; a load that fails, or comes back
// short (a replica behind the leader answered), is tried again, from that
// event. FollowTally notes where the log ends when it starts (CatchUpTo),
// so that t tells when it has counted the log as it stood then. log may
// be nil.
func FollowTally(ctx context.Context, js jetstream.JetStream, t *projections.Tally, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &follower{js: js, t: t, log: log}
	f.run(ctx)
}

// run reads the log until ctx ends, again after each failure, waiting
// longer each time (up to 5 s) while nothing new is counted.
func (f *follower) run(ctx context.Context) {
	retry := 100 * time.Millisecond
	noted := false
	for ctx.Err() == nil {
		if !noted {
			noted = f.noteEnd(ctx)
		}
		before := f.t.Seq()
		err := f.read(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errLogMadeAgain) {
			// Nothing counted so far is of the log there now.
			f.log.Warn("metrics: the event log was deleted and made again; counting the new one from its start")
			f.t.Reset()
			noted = false
			continue
		}
		if f.t.Seq() > before {
			retry = 100 * time.Millisecond
		}
		f.log.Debug("metrics: reading the event log failed; trying again", "err", err, "retry_in", retry)
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
	t     *projections.Tally
	log   *slog.Logger
	store *snats.EventStore // made when first needed
	// load reads a job's events and the stream sequence of the last one
	// read: the event store's Load when nil.
	load func(ctx context.Context, jobID string) ([]events.Event, uint64, error)
}

// noteEnd tells the tally where the log ends now (Tally.CatchUpTo), and
// reports whether it could read it.
func (f *follower) noteEnd(ctx context.Context) bool {
	st, err := f.js.Stream(ctx, snats.EventStream)
	if err != nil {
		f.log.Debug("metrics: reading where the event log ends failed", "err", err)
		return false
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		f.t.CatchUpTo(0)
	} else {
		f.t.CatchUpTo(state.LastSeq)
	}
	return true
}

// read feeds the tally until the consumer fails, a job's history cannot
// be loaded, or ctx ends.
func (f *follower) read(ctx context.Context) error {
	// From the last message counted, not the one after: a group of
	// events may have been counted in part when a history failed to load.
	// What was counted of it is skipped.
	if err := f.sameLog(ctx); err != nil {
		return err
	}
	// An ordered consumer follows a stream deleted and made again under
	// the same name without a word, and one shorter than the old log sends
	// nothing at all: the log is looked at while it is read.
	rctx, stop := context.WithCancelCause(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); f.watchLog(rctx, stop) }()
	err := snats.EventLog(f.js).Follow(rctx, max(f.t.Seq(), 1)-1, func(m snats.Message) error { return f.apply(rctx, m) })
	if cause := context.Cause(rctx); errors.Is(cause, errLogMadeAgain) {
		err = cause
	}
	stop(nil)
	<-watched
	return err
}

// apply decodes one message of the log into the tally. A message that is
// not an event, or not one of the job whose subject it is on (stored
// under another id or type), is counted as undecodable: the projector,
// the audit and the store take it for a corrupt one too.
//
// A message with nothing pending after it is the log's end for now: the
// tally is caught up once it is counted, even if the end FollowTally noted
// when it started was deleted meanwhile.
func (f *follower) apply(ctx context.Context, m snats.Message) error {
	if err := f.count(ctx, m); err != nil {
		return err
	}
	if m.Pending == 0 {
		f.t.CatchUpTo(m.Seq)
	}
	return nil
}

// count adds a message to the tally.
func (f *follower) count(ctx context.Context, m snats.Message) error {
	recs, err := snats.DecodeEvents(snats.EventSubjectPrefix, m, true)
	if err != nil {
		f.t.Undecodable(m.Seq)
		return nil
	}
	for _, r := range recs {
		if f.t.Apply(r) {
			continue
		}
		history, err := f.history(ctx, r)
		if err != nil {
			return err
		}
		f.t.ApplyWithHistory(r, history)
	}
	return nil
}

// history loads the events of r's job that come before r, which r's
// version says there are: every version from 1 up, in order. A direct get
// may be answered by a replica behind the leader, with a short history
// and no error: one that ends before r's own sequence is an error, so
// that the event is tried again, not counted from where the job did not
// stand. A job whose events cannot be read (one of them is corrupt,
// counted as undecodable where it stands, or its id is not one a job can
// have), or whose log lacks some of them although it was read past r,
// comes back as nothing, with a warning, rather than holding the tally
// up for good.
func (f *follower) history(ctx context.Context, r projections.Record) ([]events.Event, error) {
	jobID := r.Event.JobID
	evs, last, err := f.loadJob(ctx, jobID)
	var corrupt *eventstore.CorruptError
	if errors.As(err, &corrupt) || errors.Is(err, eventstore.ErrInvalid) {
		f.log.Warn("metrics: a finished job's events cannot be read; counting its new event as if it had none",
			"job", jobID, "err", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metrics: load job %s: %w", jobID, err)
	}
	if len(evs) == 0 && !r.Expires.IsZero() && !time.Now().Before(r.Expires.Add(-time.Second)) {
		// The job is leaving the live log: its head went first
		// (eventstore.Gone). There is nothing left to read.
		return nil, nil
	}
	if n := leadingVersions(evs); n+1 < r.Event.Version {
		if last < r.Seq {
			return nil, fmt.Errorf("metrics: load job %s: read up to version %d (sequence %d), before its event of version %d at sequence %d: a replica behind the leader answered",
				jobID, n, last, r.Event.Version, r.Seq)
		}
		f.log.Warn("metrics: a finished job's log lacks some of its events; counting its new event as if it had none",
			"job", jobID, "version", r.Event.Version, "read_versions", n)
		return nil, nil
	}
	return evs, nil
}

// loadJob reads a job's events with f.load, or the event store's Load.
func (f *follower) loadJob(ctx context.Context, jobID string) ([]events.Event, uint64, error) {
	if f.load != nil {
		return f.load(ctx, jobID)
	}
	if f.store == nil {
		s, err := snats.NewEventStore(ctx, f.js, snats.EventStoreOptions{})
		if err != nil {
			return nil, 0, err
		}
		f.store = s
	}
	return f.store.Load(ctx, jobID)
}

// leadingVersions is how many of evs are versions 1, 2, 3... in order
// from the first.
func leadingVersions(evs []events.Event) uint64 {
	var n uint64
	for _, e := range evs {
		if e.Version != n+1 {
			break
		}
		n++
	}
	return n
}

// errLogMadeAgain: the stream the tally counts was deleted and made again.
var errLogMadeAgain = errors.New("metrics: the event log was made again")

// logCheckEvery is how often a read looks at whether the stream is still
// the log the tally counts.
var logCheckEvery = time.Second

// sameLog reports errLogMadeAgain if the stream is not the log the tally
// counts (and makes it the one, if the tally knows of none yet).
func (f *follower) sameLog(ctx context.Context) error {
	st, err := f.js.Stream(ctx, snats.EventStream)
	if err != nil {
		return err
	}
	if !f.t.CountsLog(st.CachedInfo().Created) {
		return errLogMadeAgain
	}
	return nil
}

// watchLog stops the read of ctx (stop) once the stream is not the log
// the tally counts, looking every logCheckEvery until ctx ends.
func (f *follower) watchLog(ctx context.Context, stop context.CancelCauseFunc) {
	tick := time.NewTicker(logCheckEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := f.sameLog(ctx); errors.Is(err, errLogMadeAgain) {
			stop(err)
			return
		}
	}
}
