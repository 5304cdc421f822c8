package projector

import (
	"context"
	"errors"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/projections"
)

// batch fetches, applies and acknowledges one batch.
func (r *Runner) batch(ctx context.Context) (bool, error) {
	msgs, err := r.fetch(min(r.cfg.LeaseTTL/4, 2*time.Second))
	if err != nil {
		return false, fmt.Errorf("projector: fetch: %w", err)
	}
	err = r.applyBatch(ctx, msgs)
	if err != nil && !errors.Is(err, ErrCrash) {
		for _, m := range msgs {
			_ = m.Nak() // deliver again now rather than after the ack wait
		}
	}
	// The fetch waited for events already: no need to wait again.
	return true, err
}

// applyBatch applies, then acknowledges, one fetched batch.
func (r *Runner) applyBatch(ctx context.Context, msgs []jetstream.Msg) error {
	var (
		recs    []projections.Record
		last    jetstream.Msg // the delivery with the highest sequence: acking it acks all
		lastSeq uint64
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
		if seq > lastSeq {
			last, lastSeq = m, seq
		}
		if seq < next {
			continue // applied before: acknowledged with this batch
		}
		if seq > next {
			missing, err := readRange(ctx, r.js, r.cfg.Stream, r.cfg.Filter, next, seq-1)
			if err != nil {
				return err
			}
			if r.wholeLog && uint64(len(missing)) != seq-next {
				// A replica behind the leader answers direct gets too: a
				// short answer is not a hole in the log. The batch is
				// not acknowledged and comes again.
				return fmt.Errorf("projector: filling the gap %d..%d read %d of its %d events; trying again", next, seq-1, len(missing), seq-next)
			}
			for _, mm := range missing {
				got, err := DecodeEvents(prefix, mm, false)
				if err != nil {
					return err
				}
				recs, at = append(recs, got...), mm.Time
			}
			gaps += len(missing)
		}
		got, err := DecodeEvents(prefix, Message{Seq: seq, Subject: m.Subject(), Header: m.Headers(), Data: m.Data()}, false)
		if err != nil {
			return err
		}
		recs, at, next = append(recs, got...), meta.Timestamp, seq+1
	}
	if last == nil {
		return nil
	}
	if len(recs) > 0 {
		if !r.lease.held() {
			return errLeaseLost
		}
		if err := r.app.apply(ctx, recs, func() bool { return r.keepLease(ctx) }); err != nil {
			return err
		}
	}
	if h := r.cfg.Hooks.AfterWrite; h != nil {
		if err := h(next - 1); err != nil {
			return err
		}
	}
	if err := last.DoubleAck(ctx); err != nil {
		// The values are written; the events come again and are skipped.
		return fmt.Errorf("projector: acknowledge up to %d: %w", next-1, err)
	}
	r.next = next
	r.update(func(s *Stats) {
		s.Batches++
		s.Events += uint64(len(recs))
		s.Gaps += gaps
		s.Writes, s.Conflicts = r.app.writes, r.app.conflicts
		if len(recs) > 0 {
			s.LastSeq, s.LastAt = recs[len(recs)-1].Seq, at
		}
		s.LastError = ""
	})
	return nil
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
