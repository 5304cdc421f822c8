package nats

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestPurgeKeepsAValueWrittenAfterItsLook: a value written to a key
// between the purge's look at the markers and the purge (an engine of the
// same name started again) stays: the purge takes what came up to the
// marker it saw, nothing after it.
func TestPurgeKeepsAValueWrittenAfterItsLook(t *testing.T) {
	ctx := context.Background()
	emb, err := StartEmbedded(EmbeddedConfig{Dir: t.TempDir(), Port: -1})
	require.NoError(t, err)
	t.Cleanup(emb.Shutdown)
	nc, err := natsgo.Connect(emb.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.NoError(t, EnsureEngineStreams(ctx, js, StreamOptions{}, time.Second))
	kv, err := OpenKV(ctx, js, AccountsBucket)
	require.NoError(t, err)
	for _, key := range []string{"wait.default.a", "wait.default.b"} {
		require.NoError(t, kv.Put(ctx, key, []byte(`{}`)))
		_, err := kv.Delete(ctx, key, 0)
		require.NoError(t, err)
	}
	// The markers as a purge lists them.
	var markers []jetstream.KeyValueEntry
	w, err := kv.kv.WatchFiltered(ctx, []string{"wait.>"}, jetstream.MetaOnly())
	require.NoError(t, err)
	for e := range w.Updates() {
		if e == nil {
			break
		}
		markers = append(markers, e)
	}
	require.NoError(t, w.Stop())
	require.Len(t, markers, 2)

	require.NoError(t, kv.Put(ctx, "wait.default.a", []byte(`{"worker":"a"}`)))
	require.NoError(t, kv.purgeMarkers(ctx, markers))
	v, _, err := kv.Get(ctx, "wait.default.a")
	require.NoError(t, err)
	require.JSONEq(t, `{"worker":"a"}`, string(v), "the value written since kept")
	keys, err := kv.Keys(ctx, "wait.>")
	require.NoError(t, err)
	require.Equal(t, []string{"wait.default.a"}, keys)
}
