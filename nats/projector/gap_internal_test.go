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

// runnerOnLog is a runner, not started, on a server with SERP_EVENTS.
func runnerOnLog(t *testing.T) (*natstest.Server, *Runner) {
	t.Helper()
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	r, err := New(ctx, srv.JS, Config{Name: "t"})
	require.NoError(t, err)
	return srv, r
}

// TestGapReadShortIsNotAHole: the runner fills a gap in its deliveries
// with direct gets, which a replica behind the leader may answer. On the
// append-only log every sequence in the gap is an event, so an answer
// that is short fails the batch (it is delivered again) instead of
// moving the checkpoint past events never applied.
func TestGapReadShortIsNotAHole(t *testing.T) {
	_, r := runnerOnLog(t)
	ctx := context.Background()
	require.True(t, r.wholeLog)
	require.True(t, r.ttl)
	r.ttl = false // a log without message TTLs: every sequence is an event
	// A delivery of sequence 5 when 1-4 were not applied, and the stream
	// as this reader sees it holds none of them: the read comes back short.
	r.next = 1
	err := r.apply(ctx, []jetstream.Msg{delivery{seq: 5}}, r.cfg.HoldFor)
	require.ErrorContains(t, err, "filling the gap 1..4 read 0 of its 4 events")
	require.EqualValues(t, 1, r.next, "nothing applied")
}

// TestGapOfExpiredEvents: on a log with message TTLs, a gap that the
// stream's leader lacks too is jobs that left the live log, not a
// replica behind: the runner goes on. One the leader holds more of is
// still read again.
func TestGapOfExpiredEvents(t *testing.T) {
	srv, r := runnerOnLog(t)
	ctx := context.Background()
	require.True(t, r.ttl)
	require.True(t, r.expired(ctx, 1, 4, 0), "the leader holds none of 1-4 either")
	_, err := srv.JS.Publish(ctx, snats.EventSubjectPrefix+"job", []byte("x"))
	require.NoError(t, err)
	require.False(t, r.expired(ctx, 1, 4, 0), "the leader holds sequence 1")
	require.True(t, r.expired(ctx, 1, 4, 1))
}
