package nats_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/store"
	"github.com/serpent-engine/serpent/store/storetest"
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
	group := func(sizes ...int) []store.Append {
		var out []store.Append
		for _, n := range sizes {
			job := storetest.NewJobID()
			out = append(out, store.Append{JobID: job, Events: storetest.NewEvents(job, 1, n)})
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
		{"an append of two events among singles", 0, []int{1, 2, 1}, true},
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
