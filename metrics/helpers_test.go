package metrics_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
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

// sampleRecords is projectionstest's six jobs, interleaved as a busy engine
// writes them.
func sampleRecords(t *testing.T) ([][]events.Event, []projections.Record) {
	t.Helper()
	jobs := projectionstest.SampleLog(t)
	return jobs, projectionstest.Interleave(jobs)
}
