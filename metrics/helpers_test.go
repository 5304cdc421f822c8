package metrics_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// eventLog starts a server with an empty SERP_EVENTS and an event store
// on it.
func eventLog(t *testing.T) (*natstest.Server, *snats.EventStore) {
	t.Helper()
	srv := natstest.RunServer(t)
	_, err := snats.EnsureEventStream(t.Context(), srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	st, err := snats.NewEventStore(t.Context(), srv.JS, snats.EventStoreOptions{})
	require.NoError(t, err)
	return srv, st
}
