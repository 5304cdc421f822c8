package projector

import (
	"context"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// delivery is a message as the runner's consumer hands it over.
type delivery struct {
	jetstream.Msg
	seq uint64
}

func (d delivery) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: d.seq}}, nil
}
func (d delivery) Subject() string        { return snats.EventSubjectPrefix + "job" }
func (d delivery) Headers() natsgo.Header { return nil }
func (d delivery) Data() []byte           { return nil }

// TestGapReadShortIsNotAHole: the runner fills a gap in its deliveries
// with direct gets, which a replica behind the leader may answer. On the
// append-only log every sequence in the gap is an event, so an answer
// that is short fails the batch (it is delivered again) instead of
// moving the checkpoint past events never applied.
func TestGapReadShortIsNotAHole(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	r, err := New(ctx, srv.JS, Config{Name: "t"})
	require.NoError(t, err)
	require.True(t, r.wholeLog)
	// A delivery of sequence 5 when 1-4 were not applied, and the stream
	// as this reader sees it holds none of them: the read comes back short.
	r.next = 1
	err = r.applyBatch(ctx, []jetstream.Msg{delivery{seq: 5}})
	require.ErrorContains(t, err, "filling the gap 1..4 read 0 of its 4 events")
	require.EqualValues(t, 1, r.next, "nothing applied")
}
