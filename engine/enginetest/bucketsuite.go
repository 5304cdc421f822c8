package enginetest

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// KV is the bucket as the engine uses it: engine.WatchBucket. It is
// declared here as well so that the engine's own tests can use this
// package.
type KV interface {
	Get(ctx context.Context, key string) (value []byte, rev uint64, err error)
	Write(ctx context.Context, key string, value []byte, rev uint64) (newRev uint64, ok bool, err error)
	Put(ctx context.Context, key string, value []byte) error
	Delete(ctx context.Context, key string, rev uint64) (ok bool, err error)
	Keys(ctx context.Context, filter string) ([]string, error)
	Watch(ctx context.Context, filters []string, apply func(key string, value []byte, rev uint64, deleted bool), caughtUp func()) (stop func(), err error)
	PurgeDeleted(ctx context.Context, filter string, cutoff time.Time) error
}

// RunBucketTests is the conformance suite of engine.WatchBucket: the
// JetStream bucket in package nats and the fake here run it. open returns
// an empty bucket.
//
// The rules it pins down, beyond the interface's comments:
//
//   - revisions grow over the whole bucket, a deletion's included;
//   - a conditional write or delete at a revision the key has left does
//     nothing, and says so without an error;
//   - a deleted key is a key without a value: Get gives Revision 0, Keys
//     leaves it out, a write at revision 0 creates it again;
//   - a watch sees the current values, then caughtUp, then every change
//     in the order of its revision, deletions marked; after stop returns
//     it sees nothing more;
//   - of writers that race on one key with conditional writes, exactly
//     one wins each revision.
func RunBucketTests(t *testing.T, open func(t *testing.T) KV) {
	ctx := context.Background()
	t.Run("conditional writes", func(t *testing.T) {
		b := open(t)
		v, rev, err := b.Get(ctx, "a.x")
		require.NoError(t, err)
		require.Zero(t, rev, "no value")
		require.Nil(t, v)

		r1, ok, err := b.Write(ctx, "a.x", []byte("1"), 0)
		require.NoError(t, err)
		require.True(t, ok, "created")
		_, ok, err = b.Write(ctx, "a.x", []byte("again"), 0)
		require.NoError(t, err)
		require.False(t, ok, "not created twice")

		r2, ok, err := b.Write(ctx, "a.x", []byte("2"), r1)
		require.NoError(t, err)
		require.True(t, ok)
		require.Greater(t, r2, r1)
		_, ok, err = b.Write(ctx, "a.x", []byte("stale"), r1)
		require.NoError(t, err)
		require.False(t, ok, "a write at a revision the key has left")

		r3, ok, err := b.Write(ctx, "b.y", []byte("other"), 0)
		require.NoError(t, err)
		require.True(t, ok)
		require.Greater(t, r3, r2, "revisions grow over the whole bucket")

		v, rev, err = b.Get(ctx, "a.x")
		require.NoError(t, err)
		require.Equal(t, "2", string(v))
		require.Equal(t, r2, rev)

		require.NoError(t, b.Put(ctx, "a.x", []byte("put")))
		v, rev, err = b.Get(ctx, "a.x")
		require.NoError(t, err)
		require.Equal(t, "put", string(v))
		require.Greater(t, rev, r3)
	})

	t.Run("deletes", func(t *testing.T) {
		b := open(t)
		r1, _, err := b.Write(ctx, "k", []byte("1"), 0)
		require.NoError(t, err)
		r2, _, err := b.Write(ctx, "k", []byte("2"), r1)
		require.NoError(t, err)
		ok, err := b.Delete(ctx, "k", r1)
		require.NoError(t, err)
		require.False(t, ok, "a delete at a revision the key has left")
		ok, err = b.Delete(ctx, "k", r2)
		require.NoError(t, err)
		require.True(t, ok)
		_, rev, err := b.Get(ctx, "k")
		require.NoError(t, err)
		require.Zero(t, rev, "deleted: no value")
		keys, err := b.Keys(ctx, ">")
		require.NoError(t, err)
		require.Empty(t, keys)
		ok, err = b.Delete(ctx, "k", r2)
		require.NoError(t, err)
		require.False(t, ok, "nothing left to delete at that revision")

		r3, ok, err := b.Write(ctx, "k", []byte("3"), 0)
		require.NoError(t, err)
		require.True(t, ok, "created again")
		require.Greater(t, r3, r2)
		ok, err = b.Delete(ctx, "k", 0)
		require.NoError(t, err)
		require.True(t, ok, "a delete at revision 0 takes whatever the key holds")
		ok, err = b.Delete(ctx, "never", 0)
		require.NoError(t, err)
		require.True(t, ok)
	})

	t.Run("keys", func(t *testing.T) {
		b := open(t)
		for _, k := range []string{"limits.a", "limits.b", "slot.a.0", "slot.a.1", "slot.b.0", "wait.a.w-1"} {
			require.NoError(t, b.Put(ctx, k, []byte("v")))
		}
		for _, tc := range []struct {
			filter string
			want   []string
		}{
			{">", []string{"limits.a", "limits.b", "slot.a.0", "slot.a.1", "slot.b.0", "wait.a.w-1"}},
			{"limits.*", []string{"limits.a", "limits.b"}},
			{"slot.>", []string{"slot.a.0", "slot.a.1", "slot.b.0"}},
			{"slot.a.*", []string{"slot.a.0", "slot.a.1"}},
			{"slot.*", nil},
			{"limits.a", []string{"limits.a"}},
			{"pause.*", nil},
		} {
			keys, err := b.Keys(ctx, tc.filter)
			require.NoError(t, err, tc.filter)
			require.ElementsMatch(t, tc.want, keys, tc.filter)
		}
	})

	t.Run("watch", func(t *testing.T) {
		b := open(t)
		require.NoError(t, b.Put(ctx, "limits.a", []byte("1")))
		require.NoError(t, b.Put(ctx, "other.a", []byte("not watched")))
		require.NoError(t, b.Put(ctx, "slot.a.0", []byte("2")))
		w := watch(t, b, []string{"limits.*", "slot.>"})
		require.Equal(t, []string{"limits.a=1", "slot.a.0=2", "caught up"}, w.next(t, 3))

		r, _, err := b.Write(ctx, "slot.a.1", []byte("3"), 0)
		require.NoError(t, err)
		require.NoError(t, b.Put(ctx, "other.b", []byte("not watched")))
		ok, err := b.Delete(ctx, "slot.a.1", r)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, b.Put(ctx, "limits.a", []byte("4")))
		require.Equal(t, []string{"slot.a.1=3", "slot.a.1 deleted", "limits.a=4"}, w.next(t, 3))
		require.True(t, w.inOrder(), "in the order of their revisions")

		w.stop()
		require.NoError(t, b.Put(ctx, "limits.a", []byte("5")))
		require.Len(t, w.seen(), 6, "nothing after stop")
	})

	t.Run("purge deleted", func(t *testing.T) {
		b := open(t)
		require.NoError(t, b.Put(ctx, "wait.a.old", []byte("1")))
		require.NoError(t, b.Put(ctx, "wait.a.back", []byte("1")))
		for _, k := range []string{"wait.a.old", "wait.a.back"} {
			_, err := b.Delete(ctx, k, 0)
			require.NoError(t, err)
		}
		require.NoError(t, b.Put(ctx, "wait.a.back", []byte("2")))
		require.NoError(t, b.PurgeDeleted(ctx, "wait.>", time.Now().Add(time.Minute)))
		v, _, err := b.Get(ctx, "wait.a.back")
		require.NoError(t, err)
		require.Equal(t, "2", string(v), "a value written after its key's deletion stays")
		_, rev, err := b.Get(ctx, "wait.a.old")
		require.NoError(t, err)
		require.Zero(t, rev)
		keys, err := b.Keys(ctx, "wait.>")
		require.NoError(t, err)
		require.Equal(t, []string{"wait.a.back"}, keys)
	})

	t.Run("racing writers", func(t *testing.T) {
		b := open(t)
		const writers, rounds = 8, 10
		var wg sync.WaitGroup
		for range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for done := 0; done < rounds; {
					v, rev, err := b.Get(ctx, "counter")
					if err != nil {
						t.Error(err)
						return
					}
					n := 0
					if rev != 0 {
						n, _ = strconv.Atoi(string(v))
					}
					_, ok, err := b.Write(ctx, "counter", []byte(strconv.Itoa(n+1)), rev)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						done++
					}
				}
			}()
		}
		wg.Wait()
		v, _, err := b.Get(ctx, "counter")
		require.NoError(t, err)
		require.Equal(t, strconv.Itoa(writers*rounds), string(v), "one winner a revision")
	})
}

// watching records what a watch applies.
type watching struct {
	mu     sync.Mutex
	events []string
	revs   []uint64
	read   int // events returned by next so far
	more   chan struct{}
	stop   func()
}

func watch(t *testing.T, b KV, filters []string) *watching {
	t.Helper()
	w := &watching{more: make(chan struct{}, 100)}
	record := func(s string, rev uint64) {
		w.mu.Lock()
		w.events = append(w.events, s)
		if rev != 0 {
			w.revs = append(w.revs, rev)
		}
		w.mu.Unlock()
		w.more <- struct{}{}
	}
	stop, err := b.Watch(context.Background(), filters, func(key string, value []byte, rev uint64, deleted bool) {
		if deleted {
			record(key+" deleted", rev)
			return
		}
		record(key+"="+string(value), rev)
	}, func() { record("caught up", 0) })
	require.NoError(t, err)
	w.stop = stop
	t.Cleanup(stop)
	return w
}

// next waits for the n events after those it returned before and
// returns them.
func (w *watching) next(t *testing.T, n int) []string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		w.mu.Lock()
		if from := w.read; len(w.events) >= from+n {
			out := append([]string(nil), w.events[from:from+n]...)
			w.read += n
			w.mu.Unlock()
			return out
		}
		w.mu.Unlock()
		select {
		case <-w.more:
		case <-timeout:
			t.Fatalf("the watch saw %v, not %d more", w.seen(), n)
		}
	}
}

func (w *watching) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.events...)
}

func (w *watching) inOrder() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := 1; i < len(w.revs); i++ {
		if w.revs[i] <= w.revs[i-1] {
			return false
		}
	}
	return true
}
