package nats_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/storetest"
	"github.com/serpent-engine/serpent/nats"
)

// TestSmallGroupCommitsArePlainMessages: a group commit of a few
// one-event appends is published as plain messages (no atomic batch, which
// a single server stages in a file store of its own); a group holding an
// append of several events, or more appends than PipelineMax, is one
// atomic batch; PipelineMax below zero always batches.
func TestSmallGroupCommitsArePlainMessages(t *testing.T) {
	srv, _ := setup(t)
	ctx := context.Background()
	stream, err := srv.JS.Stream(ctx, nats.EventStream)
	require.NoError(t, err)
	group := func(sizes ...int) []eventstore.Append {
		var out []eventstore.Append
		for _, n := range sizes {
			job := storetest.NewJobID()
			evs := storetest.NewEvents(job, 1, max(n, -n))
			if n < 0 { // events too large to go together as one message
				for i := range evs {
					evs[i].Data = events.ObservationStored{Key: "k", RequestID: "req", Pages: 1,
						Result: []byte(`{"pad":"` + strings.Repeat("a", 600_000) + `"}`)}
				}
			}
			out = append(out, eventstore.Append{JobID: job, Events: evs})
		}
		return out
	}
	ones := func(n int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = 1
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		max     int
		sizes   []int
		batched bool
	}{
		{"two singles", 0, ones(2), false},
		{"PipelineMax singles", 0, ones(nats.DefaultPipelineMax), false},
		{"one more than PipelineMax", 0, ones(nats.DefaultPipelineMax + 1), true},
		{"an append of two events among singles: one message", 0, []int{1, 2, 1}, false},
		{"an append too large for one message among singles", 0, []int{1, -2, 1}, true},
		{"PipelineMax below zero", -1, ones(2), true},
		{"PipelineMax 3, three singles", 3, ones(3), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es, err := nats.NewEventStore(ctx, srv.JS, nats.EventStoreOptions{PipelineMax: tc.max})
			require.NoError(t, err)
			apps := group(tc.sizes...)
			for i, r := range es.AppendMany(ctx, apps) {
				require.NoError(t, r.Err, "append %d", i)
				got, v, err := es.Load(ctx, apps[i].JobID)
				require.NoError(t, err)
				require.Equal(t, r.Version, v)
				require.Equal(t, apps[i].Events, got)
				m, err := stream.GetMsg(ctx, v)
				require.NoError(t, err)
				require.Equal(t, tc.batched, m.Header.Get("Nats-Batch-Id") != "", "append %d: stored in an atomic batch", i)
			}
		})
	}
}

// TestAppendIsOneMessage: an append of several events is one plain
// message holding them, its headers naming them all, and a retry of it is
// known. (eventstore/storetest's GroupLimit writes the other form, an
// atomic batch of a message per event, into the same job.)
func TestAppendIsOneMessage(t *testing.T) {
	srv, s := setup(t)
	ctx := context.Background()
	stream, err := srv.JS.Stream(ctx, nats.EventStream)
	require.NoError(t, err)

	job := storetest.NewJobID()
	evs := storetest.NewEvents(job, 1, 3)
	v, err := s.Append(ctx, job, 0, evs...)
	require.NoError(t, err)
	m, err := stream.GetMsg(ctx, v)
	require.NoError(t, err)
	require.Equal(t, events.TypeHeader(evs), m.Header.Get(events.HeaderType))
	require.Equal(t, evs[0].ID, m.Header.Get(events.HeaderMsgID))
	require.Empty(t, m.Header.Get("Nats-Batch-Id"), "one plain message")
	got, err := events.DecodeAll(m.Data)
	require.NoError(t, err)
	require.Equal(t, evs, got)

	loaded, lv, err := s.Load(ctx, job)
	require.NoError(t, err)
	require.Equal(t, v, lv)
	require.Equal(t, evs, loaded)
	again, err := s.Append(ctx, job, 0, evs...)
	require.NoError(t, err, "a retry of the group is known")
	require.Equal(t, v, again)
}
