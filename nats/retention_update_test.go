package nats_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestUpdateStreamsAddsRetention: a log made before retention (no message
// TTLs on SERP_EVENTS, no max age on the command streams) is refused at
// start with a hint; --update-streams adds both in place and logs what it
// changed.
func TestUpdateStreamsAddsRetention(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	old := nats.EventStreamConfig(1)
	old.AllowMsgTTL = false
	_, err := srv.JS.CreateStream(ctx, old)
	require.NoError(t, err)
	require.NoError(t, nats.EnsureEngineStreams(ctx, srv.JS, nats.StreamOptions{}, time.Second))

	_, err = nats.EnsureEventStream(ctx, srv.JS, nats.EventStreamOptions{})
	require.ErrorContains(t, err, "allow_msg_ttl=false, serpent wants true; rerun with --update-streams")
	withAge := nats.StreamOptions{CommandMaxAge: 30 * 24 * time.Hour}
	err = nats.EnsureEngineStreams(ctx, srv.JS, withAge, time.Second)
	require.ErrorContains(t, err, "max_age=unlimited, serpent wants 720h0m0s; rerun with --update-streams")

	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	s, err := nats.EnsureEventStream(ctx, srv.JS, nats.EventStreamOptions{AllowUpdate: true, Logger: log})
	require.NoError(t, err)
	require.True(t, s.CachedInfo().Config.AllowMsgTTL)
	withAge.AllowUpdate, withAge.Logger = true, log
	require.NoError(t, nats.EnsureEngineStreams(ctx, srv.JS, withAge, time.Second))
	cmds, err := srv.JS.Stream(ctx, nats.CommandStream)
	require.NoError(t, err)
	require.Equal(t, 30*24*time.Hour, cmds.CachedInfo().Config.MaxAge)
	require.Contains(t, logged.String(), "stream=SERP_EVENTS changes=\"allow_msg_ttl=false, serpent wants true\"")
	require.Contains(t, logged.String(), "stream=SERP_COMMANDS")
	require.Contains(t, logged.String(), "stream=SERP_REJECTED")

	// Lifting the horizon again is a looser limit: allowed.
	require.NoError(t, nats.EnsureEngineStreams(ctx, srv.JS, nats.StreamOptions{AllowUpdate: true}, time.Second))
}
