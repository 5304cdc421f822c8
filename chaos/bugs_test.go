package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestEngineRestartsOnItsStreams: a second serpent run against the same
// NATS (another worker, or the same one restarted on its data) provisions
// the engine's streams again and finds them as it wants them. (It once
// refused: the server turns allow_rollup_hdrs on for SERP_WORK, since
// message schedules need it, and the stream check saw a difference.)
func TestEngineRestartsOnItsStreams(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := nats.EnsureEngineStreams(ctx, srv.JS, nats.StreamOptions{}, time.Second); err != nil {
		t.Fatal(err)
	}
	if err := nats.EnsureEngineStreams(ctx, srv.JS, nats.StreamOptions{}, time.Second); err != nil {
		t.Fatalf("a second engine cannot start on the same streams: %v", err)
	}
}
