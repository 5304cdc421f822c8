package eventstore

import (
	"context"
	"strconv"
	"time"

	"github.com/serpent-engine/serpent/events"
)

// HeaderTTL is the JetStream header that makes the server remove a
// message once it is this old (whole seconds).
const HeaderTTL = "Nats-TTL"

type expiryKey struct{}

// WithExpiry returns a context under which appends ask the store to drop
// the job's messages at t: the job's expiry (aggregate.State.Expires),
// the same for every append of the job, so the job leaves whole. A zero
// t keeps the messages for ever.
func WithExpiry(ctx context.Context, t time.Time) context.Context {
	if t.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, expiryKey{}, t)
}

// Expiry is the expiry WithExpiry put in ctx; zero if none.
func Expiry(ctx context.Context) time.Time {
	t, _ := ctx.Value(expiryKey{}).(time.Time)
	return t
}

// TTL is how long a message written at now lives so that it leaves at
// expires: whole seconds, rounded down, at least one (the server's
// smallest).
func TTL(expires, now time.Time) time.Duration {
	return max(expires.Sub(now).Truncate(time.Second), time.Second)
}

// TailDelay is how much later than a job's first message its other
// messages leave. The server removes each message on its own, at a time
// counted from when it stored it; the delay makes the head go first, so a
// job in the middle of leaving is a history without its head (Gone), never
// a shorter history that looks whole.
const TailDelay = 2 * time.Second

// SetTTL gives every message of an append to a job at version expected the
// TTL that makes it leave at expires (nothing when expires is zero): the
// job's first message (expected 0) at expires, rounded down to the second,
// every other TailDelay later. Call it before CheckSize: the header counts
// against the size limit.
func SetTTL(msgs []Message, expected uint64, expires, now time.Time) {
	if expires.IsZero() {
		return
	}
	for i := range msgs {
		ttl := TTL(expires, now)
		if expected != 0 || i > 0 {
			ttl += TailDelay
		}
		msgs[i].Header[HeaderTTL] = []string{strconv.FormatInt(int64(ttl/time.Second), 10) + "s"}
		msgs[i].TTL = ttl
	}
}

// Gone reports whether a job's history, as loaded, lost its head: its
// first event is not version 1. A job's head leaves first (SetTTL), so a
// load while the job leaves can find its tail alone. The job has left the
// live log; it is not corrupt.
func Gone(evs []events.Event) bool {
	return len(evs) > 0 && evs[0].Version != 1
}

// ExpiryOf is when a message leaves the log: when the server stored it
// plus its HeaderTTL, less TailDelay unless it is its job's first message
// (head), so every message of a job gives the job's expiry, to the second.
// Zero when it has no TTL.
func ExpiryOf(h map[string][]string, stored time.Time, head bool) time.Time {
	v := h[HeaderTTL]
	if len(v) == 0 {
		return time.Time{}
	}
	ttl, err := time.ParseDuration(v[0])
	if err != nil {
		secs, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || secs <= 0 {
			return time.Time{}
		}
		ttl = time.Duration(secs) * time.Second
	}
	if !head {
		ttl -= TailDelay
	}
	return stored.Add(ttl)
}
