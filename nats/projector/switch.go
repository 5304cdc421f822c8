package projector

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

type switchCounts struct {
	values, unchanged, written, deleted int
}

// liveValue is what the switch remembers of a live key: its revision, and
// a digest of its value (nil for a delete marker), not the value itself.
type liveValue struct {
	rev uint64
	sum *[sha256.Size]byte
}

// switchOver makes every live bucket hold exactly what its staging bucket
// holds, key by key: differing values are written over (a compare-and-set
// on the live revision, so a value someone changed meanwhile fails the
// switch instead of being lost), missing ones added, and live keys the
// staging bucket lacks deleted. ok is asked before every write.
func switchOver(ctx context.Context, staging, live *buckets, ok func() bool,
	progress func(string, uint64, uint64)) (switchCounts, error) {
	var c switchCounts
	var total uint64
	for _, b := range projections.Buckets() {
		if st, err := staging.kv[b].Status(ctx); err == nil {
			total += st.Values()
		}
	}
	for _, b := range projections.Buckets() {
		index, err := indexLive(ctx, live.kv[b])
		if err != nil {
			return c, err
		}
		var window []pendingWrite
		flush := func() error {
			n, err := waitWrites(ctx, window)
			c.written += n
			window = window[:0]
			return err
		}
		err = eachValue(ctx, staging.kv[b], func(e jetstream.KeyValueEntry) error {
			c.values++
			progress("switch", uint64(c.values), total)
			cur, had := index[e.Key()]
			delete(index, e.Key())
			if had && cur.sum != nil && *cur.sum == sha256.Sum256(e.Value()) {
				c.unchanged++
				return nil
			}
			if !ok() {
				return snats.ErrLeaseLost
			}
			fut, err := live.js.PublishMsgAsync(valueMsg(live.name[b], e.Key(), e.Value(), cur.rev, time.Time{}))
			if err != nil {
				return fmt.Errorf("projector: switch %s/%s: %w", b, e.Key(), err)
			}
			window = append(window, pendingWrite{key: b + "/" + e.Key(), fut: fut})
			if len(window) == writeWindow {
				return flush()
			}
			return nil
		}, jetstream.IgnoreDeletes())
		if ferr := flush(); err == nil {
			err = ferr
		}
		if err != nil {
			// Only a staging bucket read to its end tells which live
			// keys it lacks: nothing is deleted after a cut-short read.
			return c, err
		}
		for key, cur := range index {
			if cur.sum == nil {
				continue // already deleted
			}
			if !ok() {
				return c, snats.ErrLeaseLost
			}
			if err := live.kv[b].Delete(ctx, key, jetstream.LastRevision(cur.rev)); err != nil {
				return c, fmt.Errorf("projector: switch: delete %s/%s: %w", b, key, err)
			}
			c.deleted++
		}
	}
	return c, nil
}

type pendingWrite struct {
	key string
	fut jetstream.PubAckFuture
}

// waitWrites waits for every write of ws; it returns how many were
// stored and what the others met.
func waitWrites(ctx context.Context, ws []pendingWrite) (int, error) {
	var errs []error
	stored := 0
	for _, p := range ws {
		select {
		case <-p.fut.Ok():
			stored++
		case err := <-p.fut.Err():
			if snats.IsCASConflict(err) {
				err = fmt.Errorf("it changed during the switch (is a runner still writing?): %w", err)
			}
			errs = append(errs, fmt.Errorf("projector: switch %s: %w", p.key, err))
		case <-ctx.Done():
			return stored, ctx.Err()
		}
	}
	return stored, errors.Join(errs...)
}

// indexLive reads every key of a live bucket, delete markers included.
func indexLive(ctx context.Context, kv jetstream.KeyValue) (map[string]liveValue, error) {
	out := map[string]liveValue{}
	err := eachValue(ctx, kv, func(e jetstream.KeyValueEntry) error {
		v := liveValue{rev: e.Revision()}
		if e.Operation() == jetstream.KeyValuePut {
			sum := sha256.Sum256(e.Value())
			v.sum = &sum
		}
		out[e.Key()] = v
		return nil
	})
	return out, err
}

// eachValue hands fn every current entry of a bucket, stopping at the
// first error. A watch whose updates end before the marker that says
// every current value was sent (its consumer could not be made again, the
// context ended) is an error: the caller must not take what it saw for
// the whole bucket.
func eachValue(ctx context.Context, kv jetstream.KeyValue, fn func(jetstream.KeyValueEntry) error, opts ...jetstream.WatchOpt) error {
	w, err := kv.WatchAll(ctx, opts...)
	if err != nil {
		return fmt.Errorf("projector: read %s: %w", kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	for e := range w.Updates() {
		if e == nil {
			return nil // every current value seen
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return fmt.Errorf("projector: read %s: the watch ended before every value was read: %w", kv.Bucket(), errors.Join(ctx.Err(), errWatchCut))
}

// errWatchCut: a bucket's watch ended early.
var errWatchCut = errors.New("watch cut short")
