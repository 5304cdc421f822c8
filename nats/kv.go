package nats

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// KV is a JetStream KV bucket as the engine shares state through it
// (engine.Bucket, engine.WatchBucket): a value's revision is its stream
// sequence, and a conditional write is a compare-and-set on it.
type KV struct {
	js jetstream.JetStream
	kv jetstream.KeyValue
}

// OpenKV opens one of the engine's buckets (SchedulesBucket,
// AccountsBucket), provisioned by EnsureEngineStreams.
func OpenKV(ctx context.Context, js jetstream.JetStream, bucket string) (*KV, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if err != nil {
		return nil, fmt.Errorf("nats: bucket %s: %w (start serpent run once to provision it)", bucket, err)
	}
	return &KV{js: js, kv: kv}, nil
}

// Get returns a key's value and revision; revision 0 when it has none.
func (b *KV) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	e, err := b.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("nats: key %s of bucket %s: %w", key, b.kv.Bucket(), err)
	}
	return e.Value(), e.Revision(), nil
}

// Write creates the key (rev 0) or updates it from rev; ok is false when
// the key moved on (IsCASConflict).
func (b *KV) Write(ctx context.Context, key string, value []byte, rev uint64) (uint64, bool, error) {
	var (
		n   uint64
		err error
	)
	if rev == 0 {
		n, err = b.kv.Create(ctx, key, value)
	} else {
		n, err = b.kv.Update(ctx, key, value, rev)
	}
	if IsCASConflict(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("nats: write key %s of bucket %s: %w", key, b.kv.Bucket(), err)
	}
	return n, true, nil
}

// Put stores value whatever the key held.
func (b *KV) Put(ctx context.Context, key string, value []byte) error {
	if _, err := b.kv.Put(ctx, key, value); err != nil {
		return fmt.Errorf("nats: put key %s of bucket %s: %w", key, b.kv.Bucket(), err)
	}
	return nil
}

// Delete writes a delete marker for the key, at revision rev unless it is
// 0.
func (b *KV) Delete(ctx context.Context, key string, rev uint64) (bool, error) {
	var opts []jetstream.KVDeleteOpt
	if rev != 0 {
		opts = append(opts, jetstream.LastRevision(rev))
	}
	err := b.kv.Delete(ctx, key, opts...)
	if rev != 0 && (IsCASConflict(err) || errors.Is(err, jetstream.ErrKeyNotFound)) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("nats: delete key %s of bucket %s: %w", key, b.kv.Bucket(), err)
	}
	return true, nil
}

// Keys lists the keys with a value that match filter.
func (b *KV) Keys(ctx context.Context, filter string) ([]string, error) {
	l, err := b.kv.ListKeysFiltered(ctx, filter)
	if err != nil {
		return nil, fmt.Errorf("nats: keys %s of bucket %s: %w", filter, b.kv.Bucket(), err)
	}
	var out []string
	for k := range l.Keys() {
		out = append(out, k)
	}
	return out, nil
}

// Watch applies the bucket's values and changes of the keys matching
// filters, on a goroutine of its own.
func (b *KV) Watch(ctx context.Context, filters []string, apply func(key string, value []byte, rev uint64, deleted bool), caughtUp func()) (func(), error) {
	wctx, cancel := context.WithCancel(ctx)
	w, err := b.kv.WatchFiltered(wctx, filters)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("nats: watch bucket %s: %w", b.kv.Bucket(), err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var once sync.Once
		defer once.Do(caughtUp)
		for e := range w.Updates() {
			if e == nil { // the values there were are applied
				once.Do(caughtUp)
				continue
			}
			apply(e.Key(), e.Value(), e.Revision(), e.Operation() != jetstream.KeyValuePut)
		}
	}()
	var stopOnce sync.Once
	return func() {
		stopOnce.Do(func() { cancel(); _ = w.Stop() })
		<-done
	}, nil
}

// PurgeDeleted removes the delete markers made before cutoff of keys that
// match filter, each with what came before it on its key and nothing
// after: a value written since stays. (The bucket's PurgeDeletes would
// purge a key's whole subject, a value written after its look at the
// markers included.)
func (b *KV) PurgeDeleted(ctx context.Context, filter string, cutoff time.Time) error {
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w, err := b.kv.WatchFiltered(wctx, []string{filter}, jetstream.MetaOnly())
	if err != nil {
		return fmt.Errorf("nats: watch bucket %s: %w", b.kv.Bucket(), err)
	}
	defer func() { _ = w.Stop() }()
	var old []jetstream.KeyValueEntry
	for done := false; !done; {
		select {
		case e, ok := <-w.Updates():
			switch {
			case !ok || e == nil:
				done = true
			case e.Operation() != jetstream.KeyValuePut && e.Created().Before(cutoff):
				old = append(old, e)
			}
		case <-wctx.Done():
			return wctx.Err()
		}
	}
	return b.purgeMarkers(wctx, old)
}

// purgeMarkers purges each delete marker with what came before it on its
// key, and nothing written after it.
func (b *KV) purgeMarkers(ctx context.Context, old []jetstream.KeyValueEntry) error {
	if len(old) == 0 {
		return nil
	}
	st, err := b.js.Stream(ctx, "KV_"+b.kv.Bucket())
	if err != nil {
		return fmt.Errorf("nats: bucket %s: %w", b.kv.Bucket(), err)
	}
	var errs []error
	for _, e := range old {
		err := st.Purge(ctx, jetstream.WithPurgeSubject("$KV."+b.kv.Bucket()+"."+e.Key()),
			jetstream.WithPurgeSequence(e.Revision()+1))
		if err != nil {
			errs = append(errs, fmt.Errorf("nats: purge the delete marker of key %s of bucket %s: %w", e.Key(), b.kv.Bucket(), err))
		}
	}
	return errors.Join(errs...)
}
