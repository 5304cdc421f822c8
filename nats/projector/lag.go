package projector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
)

// Lag is how far the projections trail the log, as the server sees it:
// any process can ask, whichever runner holds the lease.
type Lag struct {
	// Applied is the runner's checkpoint: every event up to this stream
	// sequence is applied (and acknowledged).
	Applied uint64 `json:"applied_seq"`
	// Last is the log's last sequence; Pending the events not applied
	// yet.
	Last    uint64 `json:"last_seq"`
	Pending uint64 `json:"pending"`
	// AppliedAt is when the newest applied event was stored, Age how long
	// ago that was. With nothing pending, Age is just the time since the
	// log last changed.
	//
	// Behind is how long the oldest event not applied yet has waited: the
	// server's time now less the time it stored that event (0 when
	// nothing is pending, never below 0). It grows while the projections
	// stand still, however quiet the log, and after a quiet spell the
	// first new event counts only its own wait, not the spell's.
	AppliedAt time.Time     `json:"applied_at,omitzero"`
	Age       time.Duration `json:"age"`
	Behind    time.Duration `json:"behind"`
	// Holder is the runner holding the lease, if any; Paused is set while
	// a rebuild's pause holds the runners still: by their rule, until the
	// pause's revision is a lease TTL old (see pauseLive).
	Holder string `json:"holder,omitempty"`
	Paused bool   `json:"paused"`
}

// Lag measures the projections' lag now.
func (r *Runner) Lag(ctx context.Context) (Lag, error) {
	return ReadLag(ctx, r.js, r.cfg.Stream, time.Now())
}

// ReadLag measures the lag of the projections of stream at time now from
// the server: the consumer's acknowledgement floor against the stream,
// and the first event after the floor that the consumer takes (the
// oldest not applied yet). Age and Behind are by the server's clock (the
// time it gathered the consumer's information), so a reader whose clock
// is off does not see the projections older or younger than they are;
// now is used when the server does not say. A rebuild's pause is judged
// by the server's clock too (pauseLive).
func ReadLag(ctx context.Context, js jetstream.JetStream, stream string, now time.Time) (Lag, error) {
	if stream == "" {
		stream = snats.EventStream
	}
	var lag Lag
	cons, err := js.Consumer(ctx, stream, Consumer)
	if err != nil {
		return lag, fmt.Errorf("projector: consumer %s: %w (has the engine run with --projections?)", Consumer, err)
	}
	ci, err := cons.Info(ctx)
	if err != nil {
		return lag, fmt.Errorf("projector: consumer %s: %w", Consumer, err)
	}
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return lag, fmt.Errorf("projector: stream %s: %w", stream, err)
	}
	state := st.CachedInfo().State
	lag.Applied, lag.Last = ci.AckFloor.Stream, state.LastSeq
	lag.Pending = ci.NumPending + uint64(ci.NumAckPending)
	// Every time by the server's clock when it says its own (the consumer
	// info's), not the reader's against the server's.
	serverNow := now
	if !ci.TimeStamp.IsZero() {
		serverNow = ci.TimeStamp
	}
	if lag.Applied > 0 {
		m, err := st.GetMsg(ctx, lag.Applied)
		if err != nil {
			return lag, fmt.Errorf("projector: event %d: %w", lag.Applied, err)
		}
		lag.AppliedAt, lag.Age = m.Time, max(serverNow.Sub(m.Time), 0)
	}
	if lag.Pending > 0 {
		at, err := firstPending(ctx, st, ci.Config, lag.Applied+1)
		if err != nil {
			return lag, err
		}
		if !at.IsZero() {
			lag.Behind = max(serverNow.Sub(at), 0)
		}
	}
	if ctl, err := js.KeyValue(ctx, ControlBucket); err == nil {
		if e, err := ctl.Get(ctx, leaseKey); err == nil {
			if c, ok := snats.ReadLeaseClaim(e.Value()); ok {
				lag.Holder = c.Holder
			}
		}
		if e, err := ctl.Get(ctx, pauseKey); err == nil {
			lag.Paused = pauseLive(e, serverNow)
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return lag, err
	}
	return lag, nil
}

// pauseLive reports whether runners stand still for a rebuild's pause
// read once. They do until its revision has not moved for a lease TTL
// (snats.Lease.Live); one read cannot see a revision move, so the TTL is counted
// from when the server stored the revision, by the server's clock (never
// the rebuild's clock against the reader's). The TTL is the rebuild's,
// which must be the runners'; the default for a value that does not say.
func pauseLive(e jetstream.KeyValueEntry, serverNow time.Time) bool {
	ttl := DefaultLeaseTTL
	if c, ok := snats.ReadLeaseClaim(e.Value()); ok && c.TTL > 0 {
		ttl = c.TTL
	}
	return serverNow.Sub(e.Created()) < ttl
}

// firstPending is when the server stored the first message from sequence
// from on that the consumer cfg takes: the oldest event not applied yet.
// It is the zero time when there is none (the count of pending events
// the consumer gave is a moment old).
func firstPending(ctx context.Context, st jetstream.Stream, cfg jetstream.ConsumerConfig, from uint64) (time.Time, error) {
	filters := cfg.FilterSubjects
	if len(filters) == 0 {
		filters = []string{cmp.Or(cfg.FilterSubject, ">")}
	}
	var first *jetstream.RawStreamMsg
	for _, f := range filters {
		m, err := st.GetMsg(ctx, from, jetstream.WithGetMsgSubject(f))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("projector: first event on %s from %d: %w", f, from, err)
		}
		if first == nil || m.Sequence < first.Sequence {
			first = m
		}
	}
	if first == nil {
		return time.Time{}, nil
	}
	return first.Time, nil
}
