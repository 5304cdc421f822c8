package projector_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/projections"
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

// jobsIn are the non-zero job counts by state.
func jobsIn(c projections.TallyCounts) map[aggregate.Status]int {
	out := map[aggregate.Status]int{}
	for s, n := range c.Jobs {
		if n != 0 {
			out[s] = n
		}
	}
	return out
}
