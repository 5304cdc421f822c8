package nats

import (
	"context"
	"strings"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// TestSizeModelIsExact bypasses the store's own size check and lets the
// client and the server judge: a message the model sizes at the limit
// goes through, one byte more is refused. This is what makes "exactly at
// the limit" in the conformance suite mean the server's limit.
func TestSizeModelIsExact(t *testing.T) {
	tests := []struct {
		name       string
		maxMsgSize int32 // the stream's; 0 for none (the connection's max payload rules)
		n, big     int
	}{
		{"max payload, one event", 0, 1, 0},
		{"max payload, first of a batch", 0, 3, 0},
		{"max payload, last of a batch", 0, 3, 2},
		{"stream max msg size, one event", 4096, 1, 0},
		{"stream max msg size, last of a batch", 4096, 2, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setupInternal(t, tt.maxMsgSize)
			limit := s.MaxMessageSize()
			if tt.maxMsgSize > 0 {
				require.Equal(t, int(tt.maxMsgSize), limit)
			}
			ctx := context.Background()
			for _, over := range []int{1, 0} {
				job := "size-" + strings.ToLower(ulid.Make().String())
				msgs := sizedMsgs(t, job, tt.n, tt.big, limit+over)
				_, out, err := s.publish(ctx, wireMsgs(s.subject(job), msgs))
				if over == 0 {
					require.NoError(t, err)
					require.Equal(t, written, out)
					continue
				}
				require.Equal(t, failed, out, "one byte over the limit must be refused: %v", err)
				require.ErrorIs(t, err, eventstore.ErrTooLarge)
			}
		})
	}
}

func setupInternal(t *testing.T, maxMsgSize int32) *EventStore {
	t.Helper()
	srv, err := StartEmbedded(EmbeddedConfig{Dir: t.TempDir(), Port: -1})
	require.NoError(t, err)
	t.Cleanup(srv.Shutdown)
	nc, err := natsgo.Connect(srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	cfg := EventStreamConfig(1)
	cfg.MaxMsgSize = maxMsgSize
	ctx := context.Background()
	_, err = EnsureStream(ctx, js, cfg, false)
	require.NoError(t, err)
	s, err := NewEventStore(ctx, js, EventStoreOptions{})
	require.NoError(t, err)
	return s
}

// sizedMsgs encodes n events of a new job, event big of which the model
// sizes at exactly size bytes with its batch headers.
func sizedMsgs(t *testing.T, job string, n, big, size int) []eventstore.Message {
	t.Helper()
	evs := make([]events.Event, n)
	for i := range evs {
		evs[i] = events.Event{ID: ulid.Make().String(), JobID: job, Version: uint64(i + 1),
			Time: time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC), Data: events.JobCancelled{By: "test", Reason: "size"}}
	}
	measure := func(pad int) []eventstore.Message {
		evs[big].Data = events.JobCancelled{By: "test", Reason: strings.Repeat("x", pad)}
		msgs, err := eventstore.EncodeAppend(job, 0, evs)
		require.NoError(t, err)
		return msgs
	}
	m := measure(0)
	base := m[big].Size() + eventstore.BatchOverhead(big, n)
	m = measure(size - base)
	require.Equal(t, size, m[big].Size()+eventstore.BatchOverhead(big, n))
	return m
}
