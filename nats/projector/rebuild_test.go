package projector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// damage changes the live buckets the way a bug or a hand would: a wrong
// status, a lost ledger value, a stray key.
func (w *world) damage() (wrong, lost, stray projections.Target) {
	w.t.Helper()
	ctx := context.Background()
	kv := func(b string) jetstream.KeyValue {
		k, err := w.srv.JS.KeyValue(ctx, b)
		require.NoError(w.t, err)
		return k
	}
	wrong = projections.StatusTarget(w.recs[0].Event.JobID)
	_, err := kv(wrong.Bucket).Put(ctx, wrong.Key, []byte(`{"job_id":"wrong","status":"failed","seq":99999}`))
	require.NoError(w.t, err)
	lost = projections.JobTarget(w.recs[1].Event.JobID)
	require.NoError(w.t, kv(lost.Bucket).Delete(ctx, lost.Key))
	stray = projections.Target{Bucket: projections.StatusBucket, Key: "stray"}
	_, err = kv(stray.Bucket).Put(ctx, stray.Key, []byte(`{}`))
	require.NoError(w.t, err)
	return wrong, lost, stray
}

// TestRebuildEqualsLiveAndFold: a rebuild of damaged buckets gives back
// exactly the live projection as it was, which is a fresh fold of the
// log, touching only what differs.
func TestRebuildEqualsLiveAndFold(t *testing.T) {
	w := setup(t)
	w.sample()
	w.runner("live", projector.Config{})
	w.caughtUp()
	before := w.contents("")
	requireEqual(t, w.want(), before)
	w.damage()

	var phases sync.Map
	rep, err := projector.Rebuild(context.Background(), w.srv.JS, projector.RebuildOptions{LeaseTTL: time.Second,
		KeepStaging: true, Progress: func(phase string, done, total uint64) { phases.Store(phase, [2]uint64{done, total}) }})
	require.NoError(t, err)
	require.EqualValues(t, len(w.recs), rep.Events)
	require.Equal(t, len(before), rep.Values)
	require.Equal(t, 2, rep.Written, "the wrong status and the lost value")
	require.Equal(t, 1, rep.Deleted, "the stray key")
	require.Equal(t, len(before)-2, rep.Unchanged)
	p, _ := phases.Load("events")
	require.Equal(t, [2]uint64{rep.UpTo, rep.UpTo}, p)

	requireEqual(t, before, w.contents(""))
	requireEqual(t, w.want(), w.contents(projector.StagingSuffix))

	// The runner resumes and goes on from its checkpoint.
	w.more(5, "after")
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
}

// TestRebuildWhileTheEngineWrites: events keep coming during a rebuild and
// readers keep reading; none of them ever misses a value or reads a
// broken one, and the projections end up equal to a fold of the log.
func TestRebuildWhileTheEngineWrites(t *testing.T) {
	w := setup(t)
	w.sample()
	w.more(40, "early")
	w.runner("live", projector.Config{Batch: 20})
	w.caughtUp()
	before := w.contents("")

	ctx, cancel := context.WithCancel(context.Background())
	var reads atomic.Int64
	var readErr atomic.Value
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // a dashboard reading every key, over and over
		defer wg.Done()
		kvs := map[string]jetstream.KeyValue{}
		for _, b := range projections.Buckets() {
			kv, err := w.srv.JS.KeyValue(ctx, b)
			if err != nil {
				readErr.Store(err)
				return
			}
			kvs[b] = kv
		}
		for ctx.Err() == nil {
			for t := range before {
				e, err := kvs[t.Bucket].Get(ctx, t.Key)
				if ctx.Err() != nil {
					return
				}
				if err == nil && !json.Valid(e.Value()) {
					err = errors.New("not a whole value")
				}
				if err != nil {
					readErr.Store(fmt.Errorf("%s: %w", t, err))
					return
				}
				reads.Add(1)
			}
		}
	}()
	done := make(chan struct{})
	go func() { // the engine goes on
		defer close(done)
		w.more(20, "during")
	}()
	rep, err := projector.Rebuild(context.Background(), w.srv.JS, projector.RebuildOptions{LeaseTTL: time.Second, Batch: 50})
	require.NoError(t, err)
	<-done
	w.caughtUp()
	cancel()
	wg.Wait()
	if err, _ := readErr.Load().(error); err != nil {
		t.Fatalf("a reader saw a gap: %v", err)
	}
	require.Positive(t, reads.Load())
	require.Zero(t, rep.Deleted)
	requireEqual(t, w.want(), w.contents(""))

	_, err = w.srv.JS.KeyValue(context.Background(), projections.StatusBucket+projector.StagingSuffix)
	require.ErrorIs(t, err, jetstream.ErrBucketNotFound, "staging buckets are dropped")
	var status projections.StatusValue
	require.NoError(t, json.Unmarshal([]byte(w.contents("")[projections.StatusTarget(w.recs[0].Event.JobID)]), &status))
	require.Equal(t, aggregate.StatusSucceeded, status.Status)
}

// TestOneRebuildAtATime: a second rebuild gives up while one runs.
func TestOneRebuildAtATime(t *testing.T) {
	w := setup(t)
	w.sample()
	ctx := context.Background()
	ctl, err := w.srv.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: projector.ControlBucket})
	require.NoError(t, err)
	stop := make(chan struct{})
	defer close(stop)
	// Someone else's rebuild lock, kept alive.
	rev, err := ctl.Create(ctx, "rebuild", []byte(`{"holder":"other"}`))
	require.NoError(t, err)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(25 * time.Millisecond):
				if r, err := ctl.Update(ctx, "rebuild", []byte(`{"holder":"other"}`), rev); err == nil {
					rev = r
				}
			}
		}
	}()
	// The lock is renewed forty times within one lease: a stalled
	// renewal on a loaded machine does not let the rebuild take it.
	_, err = projector.Rebuild(ctx, w.srv.JS, projector.RebuildOptions{LeaseTTL: time.Second})
	require.ErrorContains(t, err, "another rebuild is running")
}
