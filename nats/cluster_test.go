package nats_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestClusterLeaderLoss runs SERP_EVENTS at R3 on a 3-node cluster with
// fsync always and shuts the stream leader down, first between appends,
// then in the middle of them: every acknowledged event is still there,
// nothing is written twice, and appends go on.
func TestClusterLeaderLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := natstest.RunCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := nats.EnsureEventStream(ctx, js, nats.EventStreamOptions{Replicas: 3})
	require.NoError(t, err)
	es, err := nats.NewEventStore(ctx, js, nats.EventStoreOptions{
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	jobs := newJobs(4)

	t.Run("between appends", func(t *testing.T) {
		appendRound(t, ctx, es, jobs)
		old := c.StreamLeader(t, js, nats.EventStream, "")
		t.Logf("shutting down stream leader %s", old.Name)
		c.Shutdown(old)
		appendRound(t, ctx, es, jobs)
		require.NotEqual(t, old.Name, c.StreamLeader(t, js, nats.EventStream, old.Name).Name)
		requireAll(t, es, jobs)

		c.Restart(t, old) // back as a follower, catches up
		c.WaitReady(t)
		appendRound(t, ctx, es, jobs)
		c.WaitStreamCurrent(t, js, nats.EventStream)
		requireAll(t, es, jobs)
	})

	t.Run("during appends", func(t *testing.T) {
		group := newJobs(4)
		writers(t, ctx, es, jobs, group, func() {
			old := c.StreamLeader(t, js, nats.EventStream, "")
			t.Logf("shutting down stream leader %s", old.Name)
			c.Shutdown(old)
		})
		requireAll(t, es, jobs)
		requireAll(t, es, group)
	})
}
