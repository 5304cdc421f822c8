package nats_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/engine/enginetest"
	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

var _ engine.WatchBucket = (*nats.KV)(nil)

// TestKVConformance: a JetStream bucket, made as the engine's buckets
// are, passes the bucket suite the in-memory fake passes.
func TestKVConformance(t *testing.T) {
	srv := natstest.RunServer(t)
	var n atomic.Int32
	enginetest.RunBucketTests(t, func(t *testing.T) enginetest.KV {
		ctx := context.Background()
		name := fmt.Sprintf("t%d", n.Add(1))
		_, err := srv.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, History: 1, Storage: jetstream.FileStorage})
		require.NoError(t, err)
		kv, err := nats.OpenKV(ctx, srv.JS, name)
		require.NoError(t, err)
		return kv
	})
}

// TestOpenKVSaysHowToProvision: a bucket that is not there is an error
// that says how to make it.
func TestOpenKVSaysHowToProvision(t *testing.T) {
	srv := natstest.RunServer(t)
	_, err := nats.OpenKV(context.Background(), srv.JS, nats.AccountsBucket)
	require.ErrorContains(t, err, "start serpent run once to provision it")
}

// TestDeleteMarkersPurged: every delete of a value leaves a marker in the
// bucket's stream; PurgeDeleted removes those older than its cutoff, so
// the accounts' bucket does not keep one per engine restart, and never a
// value written after the marker (the bucket's own PurgeDeletes would).
func TestDeleteMarkersPurged(t *testing.T) {
	ctx := context.Background()
	srv := natstest.RunServer(t)
	require.NoError(t, nats.EnsureEngineStreams(ctx, srv.JS, nats.StreamOptions{}, time.Second))
	kv, err := nats.OpenKV(ctx, srv.JS, nats.AccountsBucket)
	require.NoError(t, err)
	keys := []string{"wait.default.a", "wait.default.b", "wait.default.c"}
	for _, key := range keys {
		require.NoError(t, kv.Put(ctx, key, []byte(`{}`)))
		ok, err := kv.Delete(ctx, key, 0)
		require.NoError(t, err)
		require.True(t, ok)
	}
	stored := func(key string) uint64 {
		st, err := srv.JS.Stream(ctx, "KV_"+nats.AccountsBucket)
		require.NoError(t, err)
		info, err := st.Info(ctx, jetstream.WithSubjectFilter("$KV."+nats.AccountsBucket+"."+key))
		require.NoError(t, err)
		return info.State.Msgs
	}
	require.EqualValues(t, 3, stored("wait.>"), "one marker per deleted value")

	require.NoError(t, kv.PurgeDeleted(ctx, "wait.>", time.Now().Add(-time.Hour)))
	require.EqualValues(t, 3, stored("wait.>"), "markers newer than the cutoff stay")

	// An engine named "a" starts again and writes its value; the purge
	// takes the other markers and leaves it.
	require.NoError(t, kv.Put(ctx, "wait.default.a", []byte(`{"worker":"a"}`)))
	require.NoError(t, kv.PurgeDeleted(ctx, "wait.>", time.Now().Add(time.Hour)))
	require.EqualValues(t, 1, stored("wait.>"), "the markers gone, the value written since kept")
	v, _, err := kv.Get(ctx, "wait.default.a")
	require.NoError(t, err)
	require.JSONEq(t, `{"worker":"a"}`, string(v))

	_, err = kv.Delete(ctx, "wait.default.a", 0)
	require.NoError(t, err)
	require.NoError(t, kv.PurgeDeleted(ctx, "wait.>", time.Now().Add(time.Hour)))
	require.Zero(t, stored("wait.>"))
}
