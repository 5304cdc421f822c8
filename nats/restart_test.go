package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats"
)

// TestServerRestart restarts the single server in the middle of appends:
// appends whose reply is lost end in ErrUnknownOutcome or are settled by
// re-reading, a repeated append is never written twice, and every
// acknowledged event survives.
func TestServerRestart(t *testing.T) {
	srv, _ := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	es, err := nats.NewEventStore(ctx, srv.JS, nats.EventStoreOptions{MaxAttempts: 3})
	require.NoError(t, err)
	jobs := newJobs(3)
	writers(t, ctx, es, jobs, func() { srv.Restart(t) })
	requireAll(t, es, jobs)
	appendRound(t, ctx, es, jobs)
	requireAll(t, es, jobs)
}
