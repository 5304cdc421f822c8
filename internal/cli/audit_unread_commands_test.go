package cli

import (
	"context"
	"testing"
	"time"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/stretchr/testify/require"
)

// TestAuditChecksCommandsWithoutTheIntakeConsumer: a schedule command
// in SERP_COMMANDS that no engine ever read is "stuck" to the audit while
// the intake consumer exists, and still once that consumer is gone
// (deleted, or the streams were made beforehand and no engine ran): the
// audit does not skip the commands and say every promise is kept.
func TestAuditChecksCommandsWithoutTheIntakeConsumer(t *testing.T) {
	ctx := context.Background()
	srv := natstest.RunServer(t)
	require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{Replicas: 1}, 30*time.Second))
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{Replicas: 1})
	require.NoError(t, err)
	_, err = srv.JS.Publish(ctx, snats.ScheduleSubject,
		[]byte(`{"slot":"2026-12-02T14:00:00Z","query":"espresso scale","country":"US","language":"en","device":"mobile"}`))
	require.NoError(t, err)
	later := time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)

	_, err = cli(t, srv.URL, "audit", "--now", later)
	require.Error(t, err, "with the intake consumer: the unread command is stuck")

	require.NoError(t, srv.JS.DeleteConsumer(ctx, snats.CommandStream, snats.IntakeConsumer))
	out, err := cli(t, srv.URL, "audit", "--now", later)
	require.Error(t, err, "without it the same unread command passes:\n%s", out)
}
