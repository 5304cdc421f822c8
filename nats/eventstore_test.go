package nats_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/storetest"
	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// rawStore adds what the conformance suite needs to damage a log: a plain
// publish of arbitrary bytes on a job's subject.
type rawStore struct {
	*nats.EventStore
	js jetstream.JetStream
}

func (r rawStore) WriteRaw(ctx context.Context, jobID string, data []byte) (uint64, error) {
	ack, err := r.js.Publish(ctx, nats.EventSubjectPrefix+jobID, data)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// setup starts a server with SERP_EVENTS and returns an event store on it.
func setup(t *testing.T) (*natstest.Server, *nats.EventStore) {
	t.Helper()
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := nats.EnsureEventStream(ctx, srv.JS, nats.EventStreamOptions{})
	require.NoError(t, err)
	es, err := nats.NewEventStore(ctx, srv.JS, nats.EventStoreOptions{})
	require.NoError(t, err)
	return srv, es
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		srv, es := setup(t)
		return rawStore{es, srv.JS}
	})
}

// TestLeaderVersion: a job's version as the stream's leader has it, read
// without a direct get.
func TestLeaderVersion(t *testing.T) {
	_, es := setup(t)
	ctx := context.Background()
	job := storetest.NewJobID()
	v, err := es.LeaderVersion(ctx, job)
	require.NoError(t, err)
	require.Zero(t, v, "no events yet")
	want, err := es.Append(ctx, job, 0, storetest.NewEvents(job, 1, 3)...)
	require.NoError(t, err)
	v, err = es.LeaderVersion(ctx, job)
	require.NoError(t, err)
	require.Equal(t, want, v)
	_, err = es.LeaderVersion(ctx, "Not A Job")
	require.ErrorIs(t, err, eventstore.ErrInvalid)
}

// TestClosedConnectionIsAnUnknownOutcome: an append on a connection that
// closes (a process shutting down) may have left before it closed; the
// caller must treat it as possibly written, not as refused.
func TestClosedConnectionIsAnUnknownOutcome(t *testing.T) {
	srv, _ := setup(t)
	nc, js := natstest.Connect(t, srv.URL)
	es, err := nats.NewEventStore(context.Background(), js, nats.EventStoreOptions{})
	require.NoError(t, err)
	nc.Close()
	job := storetest.NewJobID()
	_, err = es.Append(context.Background(), job, 0, storetest.NewEvents(job, 1, 2)...)
	require.ErrorIs(t, err, eventstore.ErrUnknownOutcome)

	// So is every append of a small group commit, sent as plain messages.
	var group []eventstore.Append
	for range 3 {
		job := storetest.NewJobID()
		group = append(group, eventstore.Append{JobID: job, Events: storetest.NewEvents(job, 1, 1)})
	}
	for i, r := range es.AppendMany(context.Background(), group) {
		require.ErrorIs(t, r.Err, eventstore.ErrUnknownOutcome, "append %d", i)
	}
}
