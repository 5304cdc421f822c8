package projector

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

// DefaultBatch is the most messages of the log a runner applies at once
// unless told otherwise: about 8,000 events, a message holding one event
// or the group of an append (1.3 events a message in serpent bench's
// logs). Only a runner that trails the log fills a batch. The more events
// a batch holds, the fewer of a job's values are written more than once
// (catching up with BenchmarkRunner's log, a runner writes 1.00 values an
// event in batches of 6,000 messages, 0.90 in batches of 16,000), but the
// batch's records are what a catching-up runner holds in memory: some
// 12 MB more of an engine's peak RSS for every 1,000 messages, and an
// engine catching up must stay under 300 MB.
const DefaultBatch = 6000

// DefaultLinger is how long an idle runner waits for more events once one
// comes, unless told otherwise. It adds at most that much to how far the
// projections trail a lightly loaded log, and took some 30 % off a job's
// CPU in serpent bench's steady phase (docs/performance.md has the figures).
const DefaultLinger = 50 * time.Millisecond

// DefaultHoldFor is how long a runner holds a claimed job's records
// unless told otherwise: longer than most searches take, far shorter than
// the ack wait and the readiness bounds.
const DefaultHoldFor = 2 * time.Second

// DefaultLeaseTTL is the runners' lease TTL unless told otherwise: a
// standby takes over from a runner that died within one and a half of it
// (Config.Takeover), under 5 s.
const DefaultLeaseTTL = 3 * time.Second

// Config configures a Runner. The zero value fits SERP_EVENTS.
type Config struct {
	// Stream and Filter are the log; defaults SERP_EVENTS and
	// serp.events.>. A job's events are on the filter's subject up to its
	// last token followed by the job id (serp.events.<job_id>).
	Stream string
	Filter string
	// Replicas of the buckets the runner creates; 0 means 1.
	Replicas int
	// Projection tunes the values (the price in the spend estimate).
	Projection projections.Config
	// Batch is the most messages (events, or groups of them) fetched and
	// written at once; default DefaultBatch. A runner that keeps up takes
	// what is there; one that lags takes a whole batch, and the more
	// events a batch holds, the more of them land on the same values,
	// each written once (a job's status is written once for its claim
	// and outcome instead of twice).
	Batch int
	// Linger is how long a runner that found nothing to do, once an event
	// comes, waits for more before applying what came: default
	// DefaultLinger, below zero not at all. A lightly loaded engine writes
	// an event or two at a time; gathered for a moment, the events of
	// several jobs share one write of their day's ledger and one batch per
	// bucket. A runner that has events waiting takes them at once. A
	Linger time.Duration
	// LeaseTTL is how long a silent runner keeps the lease before another
	// takes over; default DefaultLeaseTTL. A runner renews it every third
	// of it.
	LeaseTTL time.Duration
	// Name identifies the runner in the lease; default host-pid.
	Name string
	// CacheSize is how many values the runner remembers between batches;
	// default 50,000.
	CacheSize int
	// WriteClaims writes a job's values with the batch that claims it
	// (its Sent). By default a runner holds a claimed job's records until
	// its outcome comes, for HoldFor at most: the job's own values are
	// then written once for both, and the log is acknowledged only up to
	// the first held record.
	WriteClaims bool
	// HoldFor is how long a runner holds a claimed job's records waiting
	// for its outcome; default DefaultHoldFor. A claimed job's own values
	// (status, job and key ledgers) trail the log by this much at most.
	// It is kept under half the AckWait.
	HoldFor time.Duration
	// AckWait is how long a batch delivered to a runner that died waits
	// before it is delivered again; default 30 s. (A live runner fills
	// such gaps from the stream at once when newer events arrive.)
	AckWait time.Duration
	Logger  *slog.Logger
	// Hooks lets tests stop the runner where a crash matters.
	Hooks Hooks
}

// Hooks are called at the points where a process may die.
type Hooks struct {
	// AfterWrite runs once a batch's values are written, before its
	// messages are acknowledged. An error fails the batch there; ErrCrash
	// stops the runner as a crash would: nothing more is written, nothing
	// acknowledged or released.
	AfterWrite func(lastSeq uint64) error
}

// ErrCrash is what a test hook returns to play a crash.
var ErrCrash = errors.New("projector: crash requested by a test hook")

// ErrConsumerGone: the runner's durable consumer was deleted (or its
// stream made again) while it ran. Run returns it, so the engine stops
// rather than look ready and apply nothing.
var ErrConsumerGone = errors.New("projector: the consumer " + Consumer + " is gone")

// Takeover is how long after the runner holding the lease dies a standby
// has taken it over at the latest: the lease's TTL for its key to stand
// still, and a look of the standby's (every quarter TTL) on either side.
func (c Config) Takeover() time.Duration {
	ttl := c.withDefaults().LeaseTTL
	return ttl + 2*(ttl/4)
}

func (c Config) withDefaults() Config {
	if c.Stream == "" {
		c.Stream = snats.EventStream
	}
	if c.Filter == "" {
		c.Filter = snats.EventSubjectPrefix + ">"
	}
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	switch {
	case c.Linger == 0:
		c.Linger = DefaultLinger
	case c.Linger < 0:
		c.Linger = 0
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Name == "" {
		host, _ := os.Hostname()
		c.Name = host + "-" + strconv.Itoa(os.Getpid())
	}
	if c.CacheSize == 0 {
		c.CacheSize = 50000
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.HoldFor <= 0 {
		c.HoldFor = DefaultHoldFor
	}
	// Held messages wait unacknowledged: well within the ack wait, or
	// the server delivers them again.
	c.HoldFor = min(c.HoldFor, c.AckWait/2)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Runner keeps the projection buckets up to date with SERP_EVENTS. Run it
// in every engine process: a lease in serp_projections lets exactly one
// apply at a time (the others stand by and take over within LeaseTTL of
// its end), so per-day totals never see two writers interleave.
//
// Each batch is fetched from the durable consumer serpent-projections,
// grouped by value, folded and written with one compare-and-set per value
// (the value keeps the stream sequence of its last event, so an event
// seen again is skipped), and only then acknowledged. The consumer's
// acknowledgement floor is the checkpoint; the runner also reads the
// stream directly to fill any gap in what it is delivered (messages still
// pending with a runner that died), so values always see events in stream
// order.
type Runner struct {
	js    jetstream.JetStream
	cfg   Config
	cons  jetstream.Consumer
	ctl   jetstream.KeyValue
	lease *snats.Lease
	pause *snats.Lease
	app   *applier
	log   *slog.Logger

	next uint64 // the stream sequence to apply next, while holding the lease
	held held   // records of claimed jobs kept back for a later batch
	// wholeLog: the runner reads every subject of an append-only stream
	// (deletes and purges denied), so every sequence in a gap is an event
	// and a gap read short is an error, not a hole, unless the log has
	// message TTLs (ttl) and its leader lacks the same events: they left.
	wholeLog bool
	ttl      bool

	mu      sync.Mutex
	stats   Stats
	catchUp *catchingUp // while the runner catches up with the log
}

// Stats are what a runner did, for logs and tests.
type Stats struct {
	Holder    string    `json:"holder"`
	Holding   bool      `json:"holding"`
	Paused    bool      `json:"paused"`
	Events    uint64    `json:"events"`  // events applied by this runner
	Batches   uint64    `json:"batches"` // batches written and acknowledged
	Writes    int       `json:"writes"`  // values written
	Conflicts int       `json:"conflicts"`
	Gaps      int       `json:"gaps"`     // events read directly to fill a gap
	Held      int       `json:"held"`     // events of claimed jobs kept back for the next batch
	LastSeq   uint64    `json:"last_seq"` // the newest event applied
	LastAt    time.Time `json:"last_at"`  // when it was stored
	// Pending are the events of the log after the newest delivered to
	// the runner, as the server counted them when it delivered it.
	Pending   uint64 `json:"pending"`
	LastError string `json:"last_error,omitempty"`
}

// New provisions the buckets, the control bucket and the durable
// consumer, and returns a runner.
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Runner, error) {
	cfg = cfg.withDefaults()
	b, err := ensureBuckets(ctx, js, "", cfg.Replicas)
	if err != nil {
		return nil, err
	}
	ctl, err := controlBucket(ctx, js, cfg.Replicas)
	if err != nil {
		return nil, err
	}
	cons, err := ensureConsumer(ctx, js, cfg.Stream, cfg.Filter, cfg.AckWait)
	if err != nil {
		return nil, err
	}
	st, err := js.Stream(ctx, cfg.Stream)
	if err != nil {
		return nil, fmt.Errorf("projector: stream %s: %w", cfg.Stream, err)
	}
	sc := st.CachedInfo().Config
	holder := cfg.Name + "-" + randomSuffix()
	r := &Runner{js: js, cfg: cfg, cons: cons, ctl: ctl, log: cfg.Logger.With("component", "projections"),
		lease: snats.NewLease(ctl, leaseKey, snats.LeaseConfig{Holder: holder, What: "projections", TTL: cfg.LeaseTTL}),
		pause: snats.NewLease(ctl, pauseKey, snats.LeaseConfig{Holder: holder, TTL: cfg.LeaseTTL}),
		app:   &applier{js: js, proj: projections.New(cfg.Projection), b: b, cache: newCache(cfg.CacheSize)}}
	r.wholeLog = sc.DenyDelete && sc.DenyPurge && len(sc.Subjects) == 1 && sc.Subjects[0] == cfg.Filter
	r.ttl = sc.AllowMsgTTL
	r.app.history = r.history
	r.stats.Holder = holder
	return r, nil
}

// subjectPrefix is what a job's subject starts with in the log the
// runner reads: its filter up to the last token (serp.events. for
// serp.events.>).
func (c Config) subjectPrefix() string {
	return c.Filter[:strings.LastIndexByte(c.Filter, '.')+1]
}

// history reads a job's events, from the first up to upTo.
func (r *Runner) history(ctx context.Context, jobID string, upTo uint64) ([]projections.Record, error) {
	prefix := r.cfg.subjectPrefix()
	msgs, err := snats.NewLog(r.js, r.cfg.Stream, prefix+jobID).Get(ctx, 1, upTo)
	if err != nil {
		return nil, err
	}
	recs := make([]projections.Record, 0, len(msgs))
	for _, m := range msgs {
		got, err := snats.DecodeEvents(prefix, m, false)
		if err != nil {
			return nil, err
		}
		recs = append(recs, got...)
	}
	return recs, nil
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Stats returns a snapshot of what the runner did.
func (r *Runner) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

func (r *Runner) update(f func(*Stats)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.stats)
}

// Run applies events until ctx ends, then gives the lease up. It returns
// ErrConsumerGone when its durable consumer is deleted under it.
func (r *Runner) Run(ctx context.Context) error {
	crashed := false
	defer func() {
		if crashed {
			return
		}
		release, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if len(r.held.recs) > 0 && r.keepLease(release) {
			// Written now rather than left to the next runner's ack wait.
			if err := r.apply(release, nil, 0); err != nil {
				r.log.Warn("projections: writing the held events on the way out failed", "err", err)
			}
		}
		_ = r.lease.Release(release)
		r.update(func(s *Stats) { s.Holding = false })
	}()
	idle := r.cfg.LeaseTTL / 4
	failures := 0
	lastReport := time.Now()
	for ctx.Err() == nil {
		if time.Since(lastReport) >= time.Minute && r.lease.Held() {
			lastReport = time.Now()
			r.reportLag(ctx)
		}
		worked, err := r.step(ctx)
		switch {
		case ctx.Err() != nil:
		case errors.Is(err, ErrCrash):
			crashed = true
			return err
		case err != nil:
			failures++
			r.update(func(s *Stats) { s.LastError = err.Error() })
			if failures%5 == 0 && r.consumerGone(ctx) {
				return fmt.Errorf("%w (%v)", ErrConsumerGone, err)
			}
			if failures == 1 || failures%20 == 0 {
				r.log.Warn("projections: a batch failed; trying again", "err", err, "failures", failures)
			}
			sleep(ctx, min(idle, time.Duration(failures)*100*time.Millisecond))
		case !worked:
			failures = 0
			sleep(ctx, idle)
		default:
			failures = 0
		}
	}
	return nil
}

// consumerGone reports whether the runner's durable consumer no longer
// exists (a failed look-up for another reason is not taken for that).
func (r *Runner) consumerGone(ctx context.Context) bool {
	_, err := r.js.Consumer(ctx, r.cfg.Stream, Consumer)
	return errors.Is(err, jetstream.ErrConsumerNotFound)
}

// reportLag logs the lag once a minute while the projections trail the
// log by more than a few seconds.
func (r *Runner) reportLag(ctx context.Context) {
	lag, err := r.Lag(ctx)
	if err != nil || lag.Pending == 0 || lag.Behind < 5*time.Second {
		return
	}
	r.log.Warn("projections: trailing the log", "pending", lag.Pending, "behind", lag.Behind.Round(time.Second),
		"applied_seq", lag.Applied, "last_seq", lag.Last)
}

// step does one round: honour a pause, keep or take the lease, apply one
// batch. worked is false when the runner stands by (it then waits a
// while before it looks again).
func (r *Runner) step(ctx context.Context) (worked bool, err error) {
	paused, err := r.pause.Live(ctx)
	if err != nil {
		return false, err
	}
	r.update(func(s *Stats) { s.Paused = paused })
	if paused {
		if r.lease.Claimed() {
			r.log.Info("projections: paused for a rebuild; giving the lease up")
			_ = r.lease.Release(ctx)
			r.update(func(s *Stats) { s.Holding = false })
		}
		return false, nil
	}
	if r.lease.RenewDue() {
		if err := r.lease.Renew(ctx); err != nil {
			r.update(func(s *Stats) { s.Holding = false })
			return false, err
		}
	}
	if !r.lease.Held() {
		ok, err := r.lease.Acquire(ctx)
		if err != nil || !ok {
			return false, err
		}
		if err := r.start(ctx); err != nil {
			_ = r.lease.Release(ctx)
			return false, err
		}
		return true, nil // look for a pause once more before the first batch
	}
	return r.batch(ctx)
}

// keepLease renews the lease when a renewal is due and reports whether it
// is still trusted. A batch asks before each window of writes, so a long
// one (a big batch on a slow server) keeps the lease it started with
// instead of losing it halfway and starting over.
func (r *Runner) keepLease(ctx context.Context) bool {
	if r.lease.RenewDue() {
		if err := r.lease.Renew(ctx); err != nil {
			r.log.Warn("projections: renewing the lease during a batch failed", "err", err)
			return false
		}
	}
	return r.lease.Held()
}

// start prepares a runner that just took the lease: whatever it
// remembered may have been changed by another runner or a rebuild.
func (r *Runner) start(ctx context.Context) error {
	info, err := r.cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("projector: consumer %s: %w", Consumer, err)
	}
	r.app.cache.clear()
	r.next, r.held = info.AckFloor.Stream+1, held{}
	r.update(func(s *Stats) { s.Holding = true })
	r.mu.Lock()
	r.catchUp = nil
	r.mu.Unlock()
	r.log.Info("projections: took the lease", "holder", r.lease.Holder(), "from_seq", r.next)
	return nil
}
