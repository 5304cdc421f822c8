package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Reading the server's clock.
const (
	// ClockEvery is how often a ServerClock measures its offset again.
	ClockEvery = 30 * time.Second
	// clockSamples is how many round trips one measurement takes; the
	// quickest one counts.
	clockSamples = 5
	// clockKey is the serp_accounts key every engine stamps to read the
	// server's time: one key, however many engines, so nothing piles up.
	clockKey = "clock"
	// ClockWarnOffset is the offset past which a ServerClock says, once,
	// that this machine's clock is off.
	ClockWarnOffset = time.Second
)

// ServerClock is the time by the NATS server's clock, as this process
// reads it: its own clock, corrected by the least offset that agrees with
// the time stamps the server gives messages it stores (puts to
// serp_accounts, read back by revision; each stamp falls between the put
// leaving and its acknowledgement), measured every ClockEvery and carried
// forward on the monotonic clock, which a step of the machine's wall
// clock does not move. A machine whose clock agrees with the server's to
// within a round trip is not corrected.
//
// Engines decide by the times other engines stamped: a claim's lease end,
// a key's first send and deadline, the last send before a reconciliation
// may trust the ledger. Read by each engine's own clock, a skew of half a
// minute between two machines lets one reconcile a search the other still
// runs, and buy it again. Read by the server's clock, every engine agrees
// to within a round trip, however far its machine's clock has drifted.
type ServerClock struct {
	kv    jetstream.KeyValue
	local func() time.Time
	log   *slog.Logger

	// at is the last measurement: a reading of local (with Go's
	// monotonic clock, when local is time.Now) and the server's time at
	// that moment. Now counts from it on the monotonic clock, so a step
	// of this machine's wall clock (NTP, a restored VM) does not move it.
	at     atomic.Pointer[reading]
	warned atomic.Bool

	stop context.CancelFunc
	done chan struct{}
	once sync.Once
}

// NewServerClock measures the offset of local (time.Now if nil) from the
// server's clock, and keeps measuring it until Close. It fails if the
// first measurement does: deciding by an unknown clock is not safe.
func NewServerClock(ctx context.Context, js jetstream.JetStream, local func() time.Time, log *slog.Logger) (*ServerClock, error) {
	kv, err := js.KeyValue(ctx, AccountsBucket)
	if err != nil {
		return nil, fmt.Errorf("nats: server clock: %w", err)
	}
	if local == nil {
		local = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &ServerClock{kv: kv, local: local, log: log, done: make(chan struct{})}
	if err := c.measure(ctx); err != nil {
		return nil, fmt.Errorf("nats: read the server's clock: %w", err)
	}
	bg, stop := context.WithCancel(context.WithoutCancel(ctx))
	c.stop = stop
	go c.run(bg)
	return c, nil
}

// reading is the server's time at a moment of the local clock, and how
// far it may be off (half the width of the bounds the stamps left).
type reading struct {
	local, server time.Time
	within        time.Duration
}

// Now is the server's time: the last measurement's, plus the time since
// it by this process's monotonic clock.
func (c *ServerClock) Now() time.Time {
	r := c.at.Load()
	return r.server.Add(c.local().Sub(r.local))
}

// Offset is how far the server's clock is ahead of this process's wall
// clock (behind if negative), and the most the measurement may be off by.
func (c *ServerClock) Offset() (offset, within time.Duration) {
	r := c.at.Load()
	return r.server.Sub(r.local.Round(0)), r.within
}

// Close stops measuring; Now goes on with the last offset.
func (c *ServerClock) Close() {
	c.once.Do(func() {
		if c.stop != nil {
			c.stop()
			<-c.done
		}
	})
}

func (c *ServerClock) run(ctx context.Context) {
	defer close(c.done)
	t := time.NewTicker(ClockEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.measure(ctx); err != nil && ctx.Err() == nil {
				c.log.Debug("nats: server clock not measured; the last offset stays", "err", err)
			}
		}
	}
}

// measure stamps the clock key a few times. Each stamp bounds the
// server's offset: it was stored between the put leaving (t0) and its
// acknowledgement (t1), so the offset lies between Created-t1 and
// Created-t0. The bounds of every sample are intersected, and the offset
// kept is the one nearest zero inside them: a machine whose clock agrees
// with the server's within a round trip is not corrected at all, and a
// slow round trip (a server restarting mid-put) widens the bounds instead
// of moving the clock by half of it.
func (c *ServerClock) measure(ctx context.Context) error {
	var (
		lo, hi time.Duration
		last   time.Time // the latest local reading, with its monotonic clock
		n      int
		errs   []error
	)
	for range clockSamples {
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t0 := c.local()
		rev, err := c.kv.Put(mctx, clockKey, nil)
		t1 := c.local()
		if err == nil {
			var e jetstream.KeyValueEntry
			// Another engine's stamp may have replaced this one already:
			// that sample is lost, not wrong.
			if e, err = c.kv.GetRevision(mctx, clockKey, rev); err == nil {
				a, b := e.Created().Sub(t1.Round(0)), e.Created().Sub(t0.Round(0))
				if n == 0 {
					lo, hi = a, b
				} else {
					lo, hi = max(lo, a), min(hi, b)
				}
				n, last = n+1, t1
			}
		}
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if n == 0 {
		return errors.Join(errs...)
	}
	if lo > hi {
		// Samples that disagree (a clock stepped while measuring): keep
		// the last reading, and look again next time.
		if c.at.Load() != nil {
			return nil
		}
		lo, hi = min(lo, hi), max(lo, hi)
	}
	offset := min(max(0, lo), hi)
	c.at.Store(&reading{local: last, server: last.Round(0).Add(offset), within: (hi - lo) / 2})
	if offset.Abs() > ClockWarnOffset && c.warned.CompareAndSwap(false, true) {
		c.log.Warn("this machine's clock is off the NATS server's; serpent decides by the server's",
			"server_ahead_by", offset.Round(time.Millisecond), "within", ((hi - lo) / 2).Round(time.Microsecond))
	}
	return nil
}
