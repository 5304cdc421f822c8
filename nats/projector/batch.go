package projector

import (
	"context"
	"errors"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

// batch fetches, applies and acknowledges one batch.
func (r *Runner) batch(ctx context.Context) (bool, error) {
	wait := min(r.cfg.LeaseTTL/4, 2*time.Second)
	if len(r.held.recs) > 0 {
		// What is held is written when its time is up, with or without more.
		wait = min(wait, max(time.Until(r.held.due), time.Millisecond))
	}
	start := time.Now()
	msgs, err := r.fetch(wait)
	if err != nil {
		return false, fmt.Errorf("projector: fetch: %w", err)
	}
	from := r.next
	err = r.apply(ctx, msgs, r.cfg.HoldFor)
	if err == nil && len(msgs) > 0 && r.next > from {
		r.track(start, from, r.next-1, r.Stats().Pending, len(msgs) >= r.cfg.Batch)
	}
	if err != nil && !errors.Is(err, ErrCrash) {
		for _, m := range msgs {
			_ = m.Nak() // deliver again now rather than after the ack wait
		}
	}
	// The fetch waited for events already: no need to wait again.
	return true, err
}

// apply applies, then acknowledges, one fetched batch, with the records
// held before it. It holds a claimed job's records for up to holdFor
// since it first held them; 0 writes everything.
func (r *Runner) apply(ctx context.Context, msgs []jetstream.Msg, holdFor time.Duration) error {
	var (
		recs    []projections.Record
		seqs    = make([]uint64, 0, len(msgs)) // each delivery's stream sequence
		last    jetstream.Msg                  // the delivery with the highest sequence: acking it acks all
		lastSeq uint64
		pending uint64 // the log's events after last, as the server counted them
		at      time.Time
		next    = r.next
		gaps    int
		prefix  = r.cfg.subjectPrefix()
	)
	for _, m := range msgs {
		meta, err := m.Metadata()
		if err != nil {
			return fmt.Errorf("projector: delivery without metadata: %w", err)
		}
		seq := meta.Sequence.Stream
		seqs = append(seqs, seq)
		if seq > lastSeq {
			last, lastSeq, pending = m, seq, meta.NumPending
		}
		if seq < next {
			continue // applied before: acknowledged with this batch
		}
		if seq > next {
			missing, err := snats.NewLog(r.js, r.cfg.Stream, r.cfg.Filter).Get(ctx, next, seq-1)
			if err != nil {
				return err
			}
			if r.wholeLog && uint64(len(missing)) != seq-next && !r.expired(ctx, next, seq-1, len(missing)) {
				// A replica behind the leader answers direct gets too: a
				// short answer is not a hole in the log. The batch is
				// not acknowledged and comes again.
				return fmt.Errorf("projector: filling the gap %d..%d read %d of its %d events; trying again", next, seq-1, len(missing), seq-next)
			}
			for _, mm := range missing {
				got, err := snats.DecodeEvents(prefix, mm, false)
				if err != nil {
					return err
				}
				recs, at = append(recs, got...), mm.Time
			}
			gaps += len(missing)
		}
		got, err := snats.DecodeEvents(prefix, snats.Message{Seq: seq, Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Time: meta.Timestamp}, false)
		if err != nil {
			return err
		}
		recs, at, next = append(recs, got...), meta.Timestamp, seq+1
	}
	prev := r.held
	if last == nil {
		if len(prev.recs) == 0 {
			return nil
		}
		last, lastSeq = prev.last, prev.lastSeq // nothing came: what was held is written now
	}
	hold := r.holdFrom(prev, recs, last, lastSeq, holdFor)
	// What still held records change was written when they came: the
	// values other jobs share. Only the records of the jobs let go now
	// and the batch's own are applied (held ones first, as in the log).
	now := make([]projections.Record, 0, len(prev.recs)+len(recs))
	for _, rec := range prev.recs {
		if _, h := hold.jobs[rec.Event.JobID]; !h {
			now = append(now, rec)
		}
	}
	now = append(now, recs...)
	if len(now) > 0 {
		if !r.lease.Held() {
			return snats.ErrLeaseLost
		}
		if err := r.app.applyHolding(ctx, now, hold.jobs, func() bool { return r.keepLease(ctx) }); err != nil {
			return err
		}
	}
	if h := r.cfg.Hooks.AfterWrite; h != nil {
		if err := h(next - 1); err != nil {
			return err
		}
	}
	// Acknowledging a message acknowledges every one before it: with
	// records held, the runner acknowledges up to the first of them, and
	// a runner that takes over after this one reads them again.
	ack := last
	if len(hold.recs) > 0 {
		ack = below(hold.recs[0].Seq, msgs, seqs, prev)
	}
	if ack != nil {
		if err := ack.DoubleAck(ctx); err != nil {
			// The values are written; the events come again and are skipped.
			return fmt.Errorf("projector: acknowledge the batch up to %d: %w", next-1, err)
		}
	}
	r.next, r.held = next, hold
	r.update(func(s *Stats) {
		s.Batches++
		s.Events += uint64(len(prev.recs) + len(recs) - len(hold.recs))
		s.Held = len(hold.recs)
		s.Gaps += gaps
		s.Writes, s.Conflicts = r.app.writes, r.app.conflicts
		if len(recs) > 0 {
			s.LastSeq, s.LastAt = recs[len(recs)-1].Seq, at
		}
		if len(msgs) > 0 {
			s.Pending = pending
		}
		s.LastError = ""
	})
	return nil
}

// held are the records a runner keeps back from a batch for a later one:
// those of claimed jobs, whose last event so far is a Sent (a request to
// the API under way). Such a job's outcome comes a search later, and its
// own values (status, observation, job ledger, key ledgers), folded then
// from both, are written once instead of twice. Values other jobs share
// (the day ledgers) take the held records at once. A job is held until
// its outcome comes, or for HoldFor at most, and the held messages stay
// unacknowledged until they are written.
type held struct {
	recs    []projections.Record // in log order
	jobs    map[string]time.Time // each held job, and when it was first held
	due     time.Time            // when the first of them is to be written
	last    jetstream.Msg        // the newest delivery: acknowledging it acknowledges them all
	lastSeq uint64
}

// holdFrom picks the records to hold, of those held before (prev) and
// the batch's (recs): those of the jobs whose last record is a Sent, each
// for up to holdFor since it was first held. A holdFor of 0 holds
// nothing.
func (r *Runner) holdFrom(prev held, recs []projections.Record, last jetstream.Msg, lastSeq uint64, holdFor time.Duration) held {
	if r.cfg.WriteClaims || holdFor <= 0 || len(prev.recs)+len(recs) == 0 {
		return held{}
	}
	now := time.Now()
	claimed := make(map[string]bool, len(prev.jobs)) // a held job's last record is a Sent
	for job := range prev.jobs {
		claimed[job] = true
	}
	for _, rec := range recs {
		_, sent := rec.Event.Data.(events.Sent)
		claimed[rec.Event.JobID] = sent
	}
	h := held{jobs: map[string]time.Time{}, last: last, lastSeq: lastSeq}
	for job, c := range claimed {
		since, ok := prev.jobs[job]
		if !ok {
			since = now
		}
		if !c || now.Sub(since) >= holdFor {
			continue
		}
		h.jobs[job] = since
		if h.due.IsZero() || since.Add(holdFor).Before(h.due) {
			h.due = since.Add(holdFor)
		}
	}
	if len(h.jobs) == 0 {
		return held{}
	}
	for _, list := range [][]projections.Record{prev.recs, recs} {
		for _, rec := range list {
			if _, ok := h.jobs[rec.Event.JobID]; ok {
				h.recs = append(h.recs, rec)
			}
		}
	}
	return h
}

// below returns the newest delivery, of a batch (msgs, at stream
// sequences seqs) and of the records held before it, whose sequence is
// below seq; nil when there is none.
func below(seq uint64, msgs []jetstream.Msg, seqs []uint64, prev held) jetstream.Msg {
	var (
		out  jetstream.Msg
		best uint64
	)
	if prev.last != nil && prev.lastSeq < seq {
		out, best = prev.last, prev.lastSeq
	}
	for i, m := range msgs {
		if s := seqs[i]; s < seq && s > best {
			out, best = m, s
		}
	}
	return out
}

// fetch takes what is there, up to a batch; when nothing is, it waits up
// to wait for one event and then takes what followed it. (A pull for a
// whole batch would hold every event back until the batch is full.)
func (r *Runner) fetch(wait time.Duration) ([]jetstream.Msg, error) {
	got, err := drain(r.cons.FetchNoWait(r.cfg.Batch))
	if err != nil || len(got) > 0 {
		return got, err
	}
	got, err = drain(r.cons.Fetch(1, jetstream.FetchMaxWait(wait)))
	if err != nil || len(got) == 0 || r.cfg.Batch == 1 {
		return got, err
	}
	// The runner was idle: what comes next is likely a light load's
	// trickle, which lingering a moment gathers into one batch.
	more := r.cons.FetchNoWait
	if r.cfg.Linger > 0 {
		more = func(n int) (jetstream.MessageBatch, error) {
			return r.cons.Fetch(n, jetstream.FetchMaxWait(r.cfg.Linger))
		}
	}
	rest, err := drain(more(r.cfg.Batch - 1))
	return append(got, rest...), err
}

func drain(b jetstream.MessageBatch, err error) ([]jetstream.Msg, error) {
	if err != nil {
		return nil, err
	}
	var out []jetstream.Msg
	for m := range b.Messages() {
		out = append(out, m)
	}
	if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) &&
		!errors.Is(err, natsgo.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return out, err
	}
	return out, nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// expired reports whether a gap read short holds as many events as the
// stream's leader has there: on a log with message TTLs, the others are
// jobs that left the live log.
func (r *Runner) expired(ctx context.Context, from, to uint64, read int) bool {
	if !r.ttl {
		return false
	}
	n, err := snats.LeaderHolds(ctx, r.js, r.cfg.Stream, r.cfg.Filter, from, to)
	return err == nil && n == read
}
