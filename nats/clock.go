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
// reads it: its own clock plus an offset it measures, every ClockEvery,
// against the time stamp the server gives a message it stores (a put to
// serp_accounts, read back by its revision; the quickest of a few round
// trips, so the offset is off by at most half of one).
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

	offset atomic.Int64 // nanoseconds to add to local
	spread atomic.Int64 // half the round trip of the measurement, ns
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

// Now is the server's time, by this process's clock and the offset.
func (c *ServerClock) Now() time.Time {
	return c.local().Add(time.Duration(c.offset.Load()))
}

// Offset is how far the server's clock is ahead of this process's (behind
// if negative), and the most the measurement may be off by.
func (c *ServerClock) Offset() (offset, within time.Duration) {
	return time.Duration(c.offset.Load()), time.Duration(c.spread.Load())
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

// measure stamps the clock key a few times and keeps the offset of the
// quickest round trip.
func (c *ServerClock) measure(ctx context.Context) error {
	var (
		best   time.Duration = -1
		offset time.Duration
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
				rtt := t1.Sub(t0)
				if best < 0 || rtt < best {
					best, offset = rtt, e.Created().Sub(t0.Add(rtt/2))
				}
			}
		}
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if best < 0 {
		return errors.Join(errs...)
	}
	c.offset.Store(int64(offset))
	c.spread.Store(int64(best / 2))
	if offset.Abs() > ClockWarnOffset && c.warned.CompareAndSwap(false, true) {
		c.log.Warn("this machine's clock is off the NATS server's; serpent decides by the server's",
			"server_ahead_by", offset.Round(time.Millisecond), "within", (best / 2).Round(time.Microsecond))
	}
	return nil
}
