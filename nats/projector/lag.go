package projector

import (
	"context"
	"encoding/json"
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
	// log last changed; Behind is how much older the newest applied event
	// is than the newest event (0 when caught up; with nothing applied yet,
	// how much older the first event is).
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
// the server: the consumer's acknowledgement floor against the stream.
// Age is by the server's clock (the time it gathered the consumer's
// information), so a reader whose clock is off does not see the
// projections older or younger than they are (a rebuild's pause too);
// now is used when the server does not say.
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
	if lag.Applied > 0 {
		m, err := st.GetMsg(ctx, lag.Applied)
		if err != nil {
			return lag, fmt.Errorf("projector: event %d: %w", lag.Applied, err)
		}
		// Both times by the server's clock when it says its own (the
		// consumer info's), not the reader's against the server's.
		serverNow := now
		if !ci.TimeStamp.IsZero() {
			serverNow = ci.TimeStamp
		}
		lag.AppliedAt, lag.Age = m.Time, max(serverNow.Sub(m.Time), 0)
		if lag.Pending > 0 && !state.LastTime.IsZero() {
			lag.Behind = state.LastTime.Sub(m.Time)
		}
	} else if lag.Pending > 0 && !state.FirstTime.IsZero() {
		// Nothing applied yet: at least as far behind as the log is long.
		lag.Behind = state.LastTime.Sub(state.FirstTime)
	}
	if ctl, err := js.KeyValue(ctx, ControlBucket); err == nil {
		if e, err := ctl.Get(ctx, leaseKey); err == nil {
			var v leaseValue
			if json.Unmarshal(e.Value(), &v) == nil {
				lag.Holder = v.Holder
			}
		}
		if e, err := ctl.Get(ctx, pauseKey); err == nil {
			lag.Paused = pauseLive(e, serverTime(ci, now))
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return lag, err
	}
	return lag, nil
}

// pauseLive reports whether runners stand still for a rebuild's pause
// read once. They do until its revision has not moved for a lease TTL
// (lease.live); one read cannot see a revision move, so the TTL is counted
// from when the server stored the revision, by the server's clock (never
// the rebuild's clock against the reader's). The TTL is the rebuild's,
// which must be the runners'; the default for a value that does not say.
func pauseLive(e jetstream.KeyValueEntry, serverNow time.Time) bool {
	ttl := defaultLeaseTTL
	var v leaseValue
	if json.Unmarshal(e.Value(), &v) == nil && v.TTL > 0 {
		ttl = v.TTL.D()
	}
	return serverNow.Sub(e.Created()) < ttl
}

// serverTime is the server's clock when it gathered the consumer's
// information, now when it does not say.
func serverTime(ci *jetstream.ConsumerInfo, now time.Time) time.Time {
	if ci.TimeStamp.IsZero() {
		return now
	}
	return ci.TimeStamp
}
