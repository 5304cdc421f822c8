package projector

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/eventstore"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

type switchCounts struct {
	values, unchanged, written, deleted int
}

// liveValue is what the switch remembers of a live key: its revision, a
// digest of its value (nil for a delete marker), not the value itself, and
// when it leaves.
type liveValue struct {
	rev     uint64
	sum     *[sha256.Size]byte
	expires time.Time
}

// switchOver makes every live bucket hold exactly what its staging bucket
// holds, key by key: differing values are written over (a compare-and-set
// on the live revision, so a value someone changed meanwhile fails the
// switch instead of being lost), missing ones added, and live keys the
// staging bucket lacks deleted. A value's expiry counts as part of it: a
// live value that would leave at another time is written again with the
// staged one's TTL. ok is asked before every write.
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
		index, err := indexLive(ctx, live, b)
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
		err = eachValue(ctx, staging, b, func(v bucketValue) error {
			if v.deleted {
				return nil
			}
			c.values++
			progress("switch", uint64(c.values), total)
			cur, had := index[v.key]
			delete(index, v.key)
			if had && cur.sum != nil && *cur.sum == sha256.Sum256(v.value) && sameExpiry(cur.expires, v.expires) {
				c.unchanged++
				return nil
			}
			if !ok() {
				return snats.ErrLeaseLost
			}
			fut, err := live.js.PublishMsgAsync(valueMsg(live.name[b], v.key, v.value, cur.rev, v.expires))
			if err != nil {
				return fmt.Errorf("projector: switch %s/%s: %w", b, v.key, err)
			}
			window = append(window, pendingWrite{key: b + "/" + v.key, fut: fut})
			if len(window) == writeWindow {
				return flush()
			}
			return nil
		})
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

// sameExpiry: two values leave at the same time, give or take the few
// seconds that whole-second TTLs, rounded down at each write, lose.
func sameExpiry(a, b time.Time) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	d := a.Sub(b)
	return d > -expirySlack && d < expirySlack
}

// expirySlack is how far apart two expiries of one job can be.
const expirySlack = 5 * time.Second

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
func indexLive(ctx context.Context, live *buckets, bucket string) (map[string]liveValue, error) {
	out := map[string]liveValue{}
	err := eachValue(ctx, live, bucket, func(v bucketValue) error {
		lv := liveValue{rev: v.rev, expires: v.expires}
		if !v.deleted {
			sum := sha256.Sum256(v.value)
			lv.sum = &sum
		}
		out[v.key] = lv
		return nil
	})
	return out, err
}

// bucketValue is a key's current value as its bucket's stream holds it.
type bucketValue struct {
	key     string
	value   []byte
	rev     uint64
	deleted bool      // a delete or purge marker
	expires time.Time // when its TTL removes it; zero: never
}

// eachValue hands fn every current value of one of bs's buckets,
// delete markers included, stopping at the first error. It reads the
// bucket's stream to its end as it stood when the read began (each
// key's stream holds one message), so the headers come along: a
// watch's entries have none, and the TTL is one of them.
func eachValue(ctx context.Context, bs *buckets, bucket string, fn func(bucketValue) error) error {
	name := bs.name[bucket]
	prefix := "$KV." + name + "."
	_, err := snats.NewLog(bs.js, BucketStream(name), prefix+">").Read(ctx, 0, 0, 1000, func(ms []snats.Message) error {
		for _, m := range ms {
			err := fn(bucketValue{key: strings.TrimPrefix(m.Subject, prefix), value: m.Data, rev: m.Seq,
				deleted: deleteMarker(m.Header), expires: eventstore.ExpiryOf(m.Header, m.Time, true)})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("projector: read %s: %w", name, err)
	}
	return nil
}

// deleteMarker reports whether a bucket message with headers h marks its
// key deleted: a delete, a purge, or the server's marker for a value
// its TTL removed.
func deleteMarker(h natsgo.Header) bool {
	op := h.Get("KV-Operation")
	return op == "DEL" || op == "PURGE" || h.Get(jetstream.MarkerReasonHeader) != ""
}
