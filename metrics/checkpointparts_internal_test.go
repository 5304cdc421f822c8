package metrics

import (
	"encoding/binary"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// A tally of 200,000 jobs in flight, four times what one KV value holds,
// is saved in parts of the size an engine writes and resumed whole.
func TestCheckpointOfManyJobsInFlight(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := t.Context()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	_, err = srv.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: snats.MetricsBucket, History: 1})
	require.NoError(t, err)
	ack, err := srv.JS.Publish(ctx, "serp.events.0123456789abcdef0123456789abcdef", []byte("{}"))
	require.NoError(t, err)
	info, err := logInfo(ctx, srv.JS)
	require.NoError(t, err)

	tl := NewTally().ForgetFinished()
	for i := range 200_000 {
		var id hexID
		binary.BigEndian.PutUint64(id[8:], uint64(i)*0x9e3779b97f4a7c15)
		tl.jobs[id] = packedJob(i % 4)
	}
	tl.seq, tl.ver = ack.Sequence, ack.Sequence
	saved, err := SaveCheckpoint(ctx, srv.JS, tl, info.Created)
	require.NoError(t, err)
	require.True(t, saved)

	kv, err := srv.JS.KeyValue(ctx, snats.MetricsBucket)
	require.NoError(t, err)
	e, err := kv.Get(ctx, snats.MetricsCheckpointKey)
	require.NoError(t, err)
	require.Less(t, len(e.Value()), 1024, "the head alone")
	require.Contains(t, string(e.Value()), `"n":9`, "4.5 MB in parts of 512 KB")

	back := NewTally().ForgetFinished()
	seq, _, err := Resume(ctx, srv.JS, back)
	require.NoError(t, err)
	require.Equal(t, ack.Sequence, seq)
	require.Equal(t, tl.jobs, back.jobs)
}
