package projector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

// RebuildOptions configure Rebuild. The zero value fits SERP_EVENTS and
// the runners' defaults.
type RebuildOptions struct {
	Stream   string
	Filter   string
	Replicas int
	// Projection must be what the runners use (the price in the spend
	// estimate), or the switch changes every day value.
	Projection projections.Config
	// Batch is how many messages of the log are folded and written at
	// once; default RebuildBatch.
	Batch int
	// LeaseTTL must be the runners' (default DefaultLeaseTTL).
	LeaseTTL time.Duration
	Name     string
	// KeepStaging keeps the staging buckets after the switch.
	KeepStaging bool
	// Progress, if set, is told how far each phase is: "events" while the
	// log is folded into the staging buckets, "switch" while values are
	// moved over.
	Progress func(phase string, done, total uint64)
	Logger   *slog.Logger
}

func (o RebuildOptions) withDefaults() RebuildOptions {
	rc := Config{Stream: o.Stream, Filter: o.Filter, LeaseTTL: o.LeaseTTL, Name: o.Name, Logger: o.Logger}.withDefaults()
	o.Stream, o.Filter, o.LeaseTTL, o.Name, o.Logger = rc.Stream, rc.Filter, rc.LeaseTTL, rc.Name, rc.Logger
	if o.Batch <= 0 {
		o.Batch = RebuildBatch
	}
	if o.Progress == nil {
		o.Progress = func(string, uint64, uint64) {}
	}
	return o
}

// RebuildBatch is how many messages of the log a rebuild folds at once
// unless told otherwise. A rebuild runs in a process of its own (serpent
// projections rebuild) rather than in every engine, so it holds more than
// a runner: the more events a batch holds, the fewer values it writes
// more than once.
const RebuildBatch = 16000

// RebuildReport says what a rebuild did.
type RebuildReport struct {
	// Events folded, up to stream sequence UpTo.
	Events uint64 `json:"events"`
	UpTo   uint64 `json:"up_to_seq"`
	// Values in the rebuilt projection; of the live values, Unchanged
	// already held the rebuilt value, Written were replaced or added,
	// Deleted were not in the rebuild and removed.
	Values    int           `json:"values"`
	Unchanged int           `json:"unchanged"`
	Written   int           `json:"written"`
	Deleted   int           `json:"deleted"`
	Took      time.Duration `json:"took"`
}

// Rebuild folds the whole log from sequence 1 into fresh staging buckets
// (serp_status_rebuild, ...), then switches the live buckets over:
//
//  1. with the live runners still applying, fold sequence 1 up to the
//     log's last sequence into the staging buckets;
//  2. ask the runners to pause (the pause key in serp_projections) and
//     take their lease, so none applies during the switch;
//  3. fold what was appended meanwhile into the staging buckets;
//  4. for every key, write the staging value into the live bucket where
//     it differs (a compare-and-set on the live revision), and delete live
//     keys the rebuild does not have;
//  5. give the lease back and lift the pause; the runners resume from
//     their checkpoint, and skip every event the switched values already
//     hold.
//
// A reader of a live key sees its old whole value or its new whole value,
// never a missing or half-built one. Only one rebuild runs at a time.
func Rebuild(ctx context.Context, js jetstream.JetStream, o RebuildOptions) (RebuildReport, error) {
	o = o.withDefaults()
	start := time.Now()
	var rep RebuildReport
	ctl, err := controlBucket(ctx, js, o.Replicas)
	if err != nil {
		return rep, err
	}
	holder := o.Name + "-rebuild-" + randomSuffix()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lock := snats.NewLease(ctl, rebuildKey, snats.LeaseConfig{Holder: holder, What: "rebuild", TTL: o.LeaseTTL})
	pause := snats.NewLease(ctl, pauseKey, snats.LeaseConfig{Holder: holder, What: "rebuild", TTL: o.LeaseTTL})
	runner := snats.NewLease(ctl, leaseKey, snats.LeaseConfig{Holder: holder, What: "rebuild", TTL: o.LeaseTTL})
	k := &keeper{cancel: cancel}
	defer func() {
		k.stop()
		done := context.WithoutCancel(ctx)
		_ = runner.Release(done)
		_ = pause.Release(done)
		if !o.KeepStaging {
			_ = dropStaging(done, js)
		}
		_ = lock.Release(done)
	}()
	if err := k.take(ctx, lock, "another rebuild is running"); err != nil {
		return rep, err
	}
	k.start(ctx, o.LeaseTTL/3)

	staging, err := freshBuckets(ctx, js, o.Replicas)
	if err != nil {
		return rep, err
	}
	app := &applier{js: js, proj: projections.New(o.Projection), b: staging, cache: newCache(50000), fresh: true}
	prefix := Config{Filter: o.Filter}.subjectPrefix()
	fold := func(from uint64) error {
		to, err := lastSeq(ctx, js, o.Stream)
		if err != nil {
			return err
		}
		o.Progress("events", rep.UpTo, to)
		_, err = snats.NewLog(js, o.Stream, o.Filter).Read(ctx, from, to, o.Batch, func(msgs []snats.Message) error {
			recs := make([]projections.Record, 0, len(msgs))
			for _, m := range msgs {
				got, err := snats.DecodeEvents(prefix, m, false)
				if err != nil {
					return fmt.Errorf("projector: rebuild stops at an unreadable event: %w", err)
				}
				recs = append(recs, got...)
			}
			if len(recs) == 0 {
				return nil
			}
			if err := app.apply(ctx, recs, nil); err != nil {
				return err
			}
			rep.Events += uint64(len(recs))
			rep.UpTo = recs[len(recs)-1].Seq
			o.Progress("events", rep.UpTo, to)
			return nil
		})
		rep.UpTo = max(rep.UpTo, to)
		return err
	}
	if err := fold(1); err != nil {
		return rep, cause(ctx, err)
	}
	o.Logger.Info("projections rebuild: log folded into staging; pausing the runners", "events", rep.Events, "up_to", rep.UpTo)

	if err := k.take(ctx, pause, "another pause is in force"); err != nil {
		return rep, err
	}
	if err := k.take(ctx, runner, "the projection runner did not give its lease up"); err != nil {
		return rep, err
	}
	if err := fold(rep.UpTo + 1); err != nil {
		return rep, cause(ctx, err)
	}
	live, err := ensureBuckets(ctx, js, "", o.Replicas)
	if err != nil {
		return rep, err
	}
	sw, err := switchOver(ctx, staging, live, runner.Held, o.Progress)
	if err != nil {
		return rep, cause(ctx, err)
	}
	rep.Values, rep.Unchanged, rep.Written, rep.Deleted = sw.values, sw.unchanged, sw.written, sw.deleted
	rep.Took = time.Since(start)
	return rep, nil
}

// lastSeq is a stream's last sequence.
func lastSeq(ctx context.Context, js jetstream.JetStream, stream string) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("projector: stream %s: %w", stream, err)
	}
	return s.CachedInfo().State.LastSeq, nil
}

// freshBuckets drops any staging buckets a previous rebuild left and
// creates them empty.
func freshBuckets(ctx context.Context, js jetstream.JetStream, replicas int) (*buckets, error) {
	if err := dropStaging(ctx, js); err != nil {
		return nil, err
	}
	return ensureBuckets(ctx, js, StagingSuffix, replicas)
}

func dropStaging(ctx context.Context, js jetstream.JetStream) error {
	for _, b := range projections.Buckets() {
		if err := js.DeleteKeyValue(ctx, b+StagingSuffix); err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("projector: drop staging bucket %s: %w", b+StagingSuffix, err)
		}
	}
	return nil
}

// cause prefers the reason the rebuild's context was cancelled (a lease
// lost) over the error it caused.
func cause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return err
}

// keeper renews the leases a rebuild holds, and cancels the rebuild when
// one is lost.
type keeper struct {
	mu     sync.Mutex
	leases []*snats.Lease
	cancel context.CancelCauseFunc
	done   chan struct{}
	wg     sync.WaitGroup
}

// take acquires l, waiting up to three TTLs (a holder that died leaves its
// lease to stand still for one), and keeps it renewed.
func (k *keeper) take(ctx context.Context, l *snats.Lease, busy string) error {
	deadline := time.Now().Add(3 * l.TTL())
	for {
		ok, err := l.Acquire(ctx)
		if err != nil {
			return err
		}
		if ok {
			k.mu.Lock()
			k.leases = append(k.leases, l)
			k.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("projector: %s (key %s of %s); try again later", busy, l.Key(), ControlBucket)
		}
		sleep(ctx, l.TTL()/10)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// start renews the leases taken every period until stop.
func (k *keeper) start(ctx context.Context, every time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.done = make(chan struct{})
	k.wg.Add(1)
	go k.run(ctx, every, k.done)
}

func (k *keeper) run(ctx context.Context, every time.Duration, done chan struct{}) {
	defer k.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-t.C:
		}
		k.mu.Lock()
		leases := append([]*snats.Lease(nil), k.leases...)
		k.mu.Unlock()
		for _, l := range leases {
			if err := l.Renew(ctx); err != nil && ctx.Err() == nil {
				k.cancel(fmt.Errorf("projector: rebuild lost its %s lease: %w", l.Key(), err))
				return
			}
		}
	}
}

func (k *keeper) stop() {
	k.mu.Lock()
	if k.done != nil {
		close(k.done)
		k.done = nil
	}
	k.mu.Unlock()
	k.wg.Wait()
}
