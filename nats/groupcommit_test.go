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

// TestGroupsAndEventPerMessage: an append of several events is one
// message holding them (its headers name them all); with EventPerMessage
// it is an atomic batch of a message per event, as releases before
// groups wrote it. A job whose log holds both forms loads whole, and
// either store retries and extends it.
func TestGroupsAndEventPerMessage(t *testing.T) {
	srv, grouping := setup(t)
	ctx := context.Background()
	stream, err := srv.JS.Stream(ctx, nats.EventStream)
	require.NoError(t, err)
	perEvent, err := nats.NewEventStore(ctx, srv.JS, nats.EventStoreOptions{EventPerMessage: true})
	require.NoError(t, err)

	job := storetest.NewJobID()
	first := storetest.NewEvents(job, 1, 3)
	v1, err := grouping.Append(ctx, job, 0, first...)
	require.NoError(t, err)
	m, err := stream.GetMsg(ctx, v1)
	require.NoError(t, err)
	require.Equal(t, events.TypeHeader(first), m.Header.Get(events.HeaderType))
	require.Equal(t, first[0].ID, m.Header.Get(eventstore.HeaderMsgID))
	require.Empty(t, m.Header.Get("Nats-Batch-Id"), "one plain message")
	got, err := events.DecodeAll(m.Data)
	require.NoError(t, err)
	require.Equal(t, first, got)

	second := storetest.NewEvents(job, 4, 3)
	v2, err := perEvent.Append(ctx, job, v1, second...)
	require.NoError(t, err)
	require.Equal(t, v1+3, v2, "a message per event")
	for i, e := range second {
		m, err := stream.GetMsg(ctx, v1+1+uint64(i))
		require.NoError(t, err)
		require.Equal(t, e.Type(), m.Header.Get(events.HeaderType))
		require.Equal(t, e.ID, m.Header.Get(eventstore.HeaderMsgID))
		require.NotEmpty(t, m.Header.Get("Nats-Batch-Id"), "in an atomic batch")
	}

	for _, s := range []*nats.EventStore{grouping, perEvent} {
		evs, v, err := s.Load(ctx, job)
		require.NoError(t, err)
		require.Equal(t, v2, v)
		require.Equal(t, append(append([]events.Event{}, first...), second...), evs)
		again, err := s.Append(ctx, job, 0, first...)
		require.NoError(t, err, "a retry of the group is known")
		require.Equal(t, v1, again)
		again, err = s.Append(ctx, job, v1, second...)
		require.NoError(t, err, "a retry of the batch is known")
		require.Equal(t, v2, again)
	}
}
