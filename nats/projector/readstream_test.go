package projector_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
)

// TestReadStreamWithNothingToMatch: a range holding no message of the
// filter (the stream holds others, or matching ones only later) ends at
// once, without an empty chunk; an ordered consumer left to find one
// would wait for ever.
func TestReadStreamWithNothingToMatch(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "MIXED", Subjects: []string{"a.>", "b.>"}})
	require.NoError(t, err)
	for _, subj := range []string{"b.1", "b.2", "a.1", "b.3"} { // sequences 1-4
		_, err := srv.JS.Publish(ctx, subj, []byte("x"))
		require.NoError(t, err)
	}
	read := func(filter string, from, to uint64) [][]uint64 {
		t.Helper()
		var chunks [][]uint64
		_, err := projector.ReadStream(ctx, srv.JS, "MIXED", filter, from, to, 10, func(msgs []projector.Message) error {
			var seqs []uint64
			for _, m := range msgs {
				seqs = append(seqs, m.Seq)
			}
			chunks = append(chunks, seqs)
			return nil
		})
		require.NoError(t, err)
		return chunks
	}
	require.Empty(t, read("c.>", 1, 0), "no message of the filter at all")
	require.Empty(t, read("a.>", 1, 2), "the only match lies past the range")
	require.Empty(t, read("a.>", 4, 0), "the only match lies before the range")
	require.Equal(t, [][]uint64{{3}}, read("a.>", 1, 0))
	require.Equal(t, [][]uint64{{1, 2, 4}}, read("b.>", 1, 0))
	require.Equal(t, [][]uint64{{1, 2}}, read("b.>", 1, 3))
}
