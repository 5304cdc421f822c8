package nats_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// EachSubject reads a stream's subjects past the server's 100,000 a
// request, each once, and only those of its filter; LastHeader asks the
// leader for a subject's last message.
func TestEachSubject(t *testing.T) {
	srv := natstest.RunServer(t)
	// A deadline of its own: reading 100,000 subjects can take the server
	// longer than a request's default timeout on a busy machine.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	_, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "MANY", Subjects: []string{"many.>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	const n = 100_123
	// In rounds the client never stalls on, however slow the server is
	// to acknowledge: at most 1,200 publishes wait for theirs.
	done := func() {
		select {
		case <-srv.JS.PublishAsyncComplete():
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	for i := range n {
		_, err := srv.JS.PublishAsync(fmt.Sprintf("many.a.%d", i), nil)
		require.NoError(t, err)
		if i%5 == 0 {
			_, err = srv.JS.PublishAsync(fmt.Sprintf("many.b.%d", i), nil)
			require.NoError(t, err)
		}
		if i%1000 == 999 {
			done()
		}
	}
	done()

	seen := make(map[string]int, n)
	require.NoError(t, nats.EachSubject(ctx, srv.JS, "MANY", "many.a.>", func(s string) { seen[s]++ }))
	require.Len(t, seen, n)
	for s, times := range seen {
		require.Equal(t, 1, times, s)
	}
	seen = map[string]int{}
	require.NoError(t, nats.EachSubject(ctx, srv.JS, "MANY", "many.b.*", func(s string) { seen[s]++ }))
	require.Len(t, seen, (n+4)/5)
	require.NoError(t, nats.EachSubject(ctx, srv.JS, "MANY", "many.c.>", func(s string) { t.Errorf("subject %s", s) }))

	err = nats.EachSubject(ctx, srv.JS, "NONE", ">", func(string) {})
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)

	m := natsgo.NewMsg("many.b.5")
	m.Header.Set("Who", "the last")
	_, err = srv.JS.PublishMsg(ctx, m)
	require.NoError(t, err)
	h, ok, err := nats.LastHeader(ctx, srv.JS, "MANY", "many.b.5")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "the last", h.Get("Who"))
	_, ok, err = nats.LastHeader(ctx, srv.JS, "MANY", "many.b.6")
	require.NoError(t, err)
	require.False(t, ok)
	_, _, err = nats.LastHeader(ctx, srv.JS, "NONE", "many.b.5")
	require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
}
