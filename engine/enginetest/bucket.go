package enginetest

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"
)

// Bucket is an in-memory bucket (engine.WatchBucket), as strict as a
// JetStream KV bucket: one revision counter over every key (a deletion takes one too),
// conditional writes that fail once a key moved on, and watches that see
// changes later than the write, on a goroutine of their own, in the order
// of their revisions. Deletions leave nothing behind, so PurgeDeleted has
// nothing to do.
type Bucket struct {
	mu       sync.Mutex
	rev      uint64
	values   map[string]entry
	watchers map[*watcher]bool
	// BeforeWrite, if set, runs before every Write, Put and Delete, with
	// no lock held: a test can fail the write (its error is returned) or
	// let another writer in first.
	BeforeWrite func(key string) error
}

var _ KV = (*Bucket)(nil)

// NewBucket returns an empty bucket.
func NewBucket() *Bucket {
	return &Bucket{values: map[string]entry{}, watchers: map[*watcher]bool{}}
}

// entry is a key's value at a revision, or its deletion.
type entry struct {
	key     string
	value   []byte
	rev     uint64
	deleted bool
}

// Get returns a key's value and revision; revision 0 when it has none.
func (b *Bucket) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.values[key]
	if !ok {
		return nil, 0, nil
	}
	return slices.Clone(e.value), e.rev, nil
}

// Write stores value if key is at rev (0: has no value).
func (b *Bucket) Write(ctx context.Context, key string, value []byte, rev uint64) (uint64, bool, error) {
	if err := b.before(ctx, key); err != nil {
		return 0, false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.values[key].rev != rev {
		return 0, false, nil
	}
	return b.setLocked(key, value, false), true, nil
}

// Put stores value whatever key held.
func (b *Bucket) Put(ctx context.Context, key string, value []byte) error {
	if err := b.before(ctx, key); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setLocked(key, value, false)
	return nil
}

// Delete removes key's value if key is at rev (0: whatever it holds).
func (b *Bucket) Delete(ctx context.Context, key string, rev uint64) (bool, error) {
	if err := b.before(ctx, key); err != nil {
		return false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	have, ok := b.values[key]
	if rev != 0 && (!ok || have.rev != rev) {
		return false, nil
	}
	b.setLocked(key, nil, true)
	return true, nil
}

// Keys lists the keys with a value that match filter, in order.
func (b *Bucket) Keys(ctx context.Context, filter string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for key := range b.values {
		if Match(filter, key) {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out, nil
}

// PurgeDeleted has nothing to do: deletions leave nothing here.
func (b *Bucket) PurgeDeleted(context.Context, string, time.Time) error { return nil }

func (b *Bucket) before(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.BeforeWrite != nil {
		return b.BeforeWrite(key)
	}
	return nil
}

// setLocked writes a value or a deletion at the next revision and tells
// the watchers; b.mu is held.
func (b *Bucket) setLocked(key string, value []byte, deleted bool) uint64 {
	b.rev++
	e := entry{key: key, value: slices.Clone(value), rev: b.rev, deleted: deleted}
	if deleted {
		delete(b.values, key)
	} else {
		b.values[key] = e
	}
	for w := range b.watchers {
		w.add(e)
	}
	return b.rev
}

// Watch applies the values of the keys matching filters, then each
// change, on a goroutine of its own.
func (b *Bucket) Watch(ctx context.Context, filters []string, apply func(key string, value []byte, rev uint64, deleted bool), caughtUp func()) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &watcher{filters: filters, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	b.mu.Lock()
	var initial []entry
	for _, e := range b.values {
		if w.matches(e.key) {
			e.value = slices.Clone(e.value)
			initial = append(initial, e)
		}
	}
	slices.SortFunc(initial, func(x, y entry) int { return cmp.Compare(x.rev, y.rev) })
	b.watchers[w] = true
	b.mu.Unlock()
	go w.run(ctx, initial, apply, caughtUp)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.watchers, w)
			b.mu.Unlock()
			close(w.stop)
		})
		<-w.done
	}
	return stop, nil
}

// watcher queues the changes one watch has yet to apply.
type watcher struct {
	filters []string
	mu      sync.Mutex
	queue   []entry
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func (w *watcher) matches(key string) bool {
	return slices.ContainsFunc(w.filters, func(f string) bool { return Match(f, key) })
}

// add queues a change if the watch is for its key; the bucket's lock is
// held, so changes are queued in the order of their revisions.
func (w *watcher) add(e entry) {
	if !w.matches(e.key) {
		return
	}
	w.mu.Lock()
	w.queue = append(w.queue, e)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) run(ctx context.Context, initial []entry, apply func(string, []byte, uint64, bool), caughtUp func()) {
	defer close(w.done)
	for _, e := range initial {
		apply(e.key, e.value, e.rev, false)
	}
	caughtUp()
	for {
		select {
		case <-w.wake:
		case <-w.stop:
			return
		case <-ctx.Done():
			return
		}
		w.mu.Lock()
		queue := w.queue
		w.queue = nil
		w.mu.Unlock()
		for _, e := range queue {
			select {
			case <-w.stop:
				return
			default:
			}
			apply(e.key, e.value, e.rev, e.deleted)
		}
	}
}

// Match reports whether a key matches a filter of NATS subject tokens:
// "*" matches any one token, a last ">" one or more.
func Match(filter, key string) bool {
	f, k := strings.Split(filter, "."), strings.Split(key, ".")
	for i, tok := range f {
		switch {
		case tok == ">" && i == len(f)-1:
			return len(k) > i
		case i >= len(k):
			return false
		case tok != "*" && tok != k[i]:
			return false
		}
	}
	return len(f) == len(k)
}
