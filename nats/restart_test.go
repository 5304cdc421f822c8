package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats"
)

// TestServerRestart restarts the single server in the middle of appends,
// single ones and small group commits: appends whose reply is lost end in
// ErrUnknownOutcome or are settled by re-reading, a repeated append is
// never written twice, and every acknowledged event survives.
func TestServerRestart(t *testing.T) {
	srv, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	es, err := nats.NewEventStore(ctx, srv.JS, nats.EventStoreOptions{MaxAttempts: 3})
	require.NoError(t, err)
	jobs, group := newJobs(3), newJobs(4)
	writers(t, ctx, es, jobs, group, func() { srv.Restart(t) })
	requireAll(t, es, jobs)
	requireAll(t, es, group)
	appendRound(t, ctx, es, jobs)
	requireAll(t, es, jobs)
}
