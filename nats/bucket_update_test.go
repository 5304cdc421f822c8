package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestBucketScaleUpKeepsOtherSettings: --update-streams on a bucket
// made beforehand at R1 adds copies; "its other settings are left as they
// are" (ensureBucket), so the history and limits an operator gave it stay.
func TestBucketScaleUpKeepsOtherSettings(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: nats.SchedulesBucket, History: 5,
		MaxBytes: 1 << 30, Storage: jetstream.FileStorage, Replicas: 1})
	require.NoError(t, err)
	for _, v := range []string{"a", "b", "c"} {
		_, err := kv.PutString(ctx, "s1", v)
		require.NoError(t, err)
	}

	require.NoError(t, nats.EnsureEngineStreams(ctx, js, nats.StreamOptions{Replicas: 3, AllowUpdate: true}, time.Minute))

	st, err := kv.Status(ctx)
	require.NoError(t, err)
	cfg := st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config
	require.Equal(t, 3, cfg.Replicas)
	require.EqualValues(t, 5, cfg.MaxMsgsPerSubject, "history of the bucket")
	require.EqualValues(t, 1<<30, cfg.MaxBytes, "max bytes of the bucket")
	hist, err := kv.History(ctx, "s1")
	require.NoError(t, err)
	require.Len(t, hist, 3, "revisions kept")
}
