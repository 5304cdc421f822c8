package projector

import (
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/projections"
)

// A tally of 200,000 jobs in flight, four times what one KV value holds,
// is saved in parts of the size an engine writes and resumed whole.
func TestTallyCheckpointOfManyJobsInFlight(t *testing.T) {
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

	tl := manyJobsInFlight(t, 200_000, ack.Sequence, info.Created)
	saved, err := SaveTallyCheckpoint(ctx, srv.JS, tl, info.Created)
	require.NoError(t, err)
	require.True(t, saved)

	kv, err := srv.JS.KeyValue(ctx, snats.MetricsBucket)
	require.NoError(t, err)
	e, err := kv.Get(ctx, snats.MetricsCheckpointKey)
	require.NoError(t, err)
	require.Less(t, len(e.Value()), 1024, "the head alone")
	require.Contains(t, string(e.Value()), `"n":9`, "4.5 MB in parts of 512 KB")

	back := projections.NewTally().ForgetFinished()
	seq, _, err := ResumeTally(ctx, srv.JS, back)
	require.NoError(t, err)
	require.Equal(t, ack.Sequence, seq)
	require.Equal(t, tl.Remembered(), back.Remembered())
	want, _ := tl.Live()
	got, _ := back.Live()
	require.Equal(t, want, got)
}

// manyJobsInFlight is a tally that forgets finished jobs, at sequence seq
// of the log made at created, holding n scheduled jobs: restored from a
// checkpoint made up for it, as folding n jobs would take a log of them.
func manyJobsInFlight(t *testing.T, n int, seq uint64, created time.Time) *projections.Tally {
	t.Helper()
	packed := make([]byte, 0, 17*n)
	for i := range n {
		var id [17]byte
		binary.BigEndian.PutUint64(id[8:16], uint64(i)*0x9e3779b97f4a7c15)
		id[16] = 1 // scheduled
		packed = append(packed, id[:]...)
	}
	b, err := json.Marshal(map[string]any{"format": projections.TallyCheckpointFormat, "log": created, "seq": seq, "ver": seq,
		"forget": true, "counts": map[string]any{"jobs": map[string]int{"scheduled": n}}, "packed": packed})
	require.NoError(t, err)
	tl := projections.NewTally().ForgetFinished()
	require.NoError(t, tl.RestoreCheckpoint(b, created))
	require.Equal(t, n, tl.Remembered())
	return tl
}
