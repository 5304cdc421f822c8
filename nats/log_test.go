package nats_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestLogReadWithNothingToMatch: a range holding no message of the
// filter (the stream holds others, or matching ones only later) ends at
// once, without an empty chunk; an ordered consumer left to find one
// would wait for ever.
func TestLogReadWithNothingToMatch(t *testing.T) {
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
		_, err := snats.NewLog(srv.JS, "MIXED", filter).Read(ctx, from, to, 10, func(msgs []snats.Message) error {
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

// TestLogReadLeavesNoConsumer: a read deletes its consumer when it is
// done, so reads in a row (an audit's of many jobs) never meet the
// server's limit of consumers on a stream. The limit here is 10; the
// reads are 30.
func TestLogReadLeavesNoConsumer(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	st, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{Name: "READS", Subjects: []string{"r.>"}, MaxConsumers: 10})
	require.NoError(t, err)
	_, err = srv.JS.Publish(ctx, "r.1", []byte("x"))
	require.NoError(t, err)
	for range 30 {
		_, err := snats.NewLog(srv.JS, "READS", "r.>").Read(ctx, 1, 0, 10, func([]snats.Message) error { return nil })
		require.NoError(t, err)
	}
	info, err := st.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Consumers)
}

// TestLogGetWithoutAnAnswerIsNotItsEnd: a direct get batch whose request
// goes unanswered (here, its deadline passed before it left) ends with no
// message and no "none": Get says so, rather than hand back a range, or a
// job's history, that stops short.
func TestLogGetWithoutAnAnswerIsNotItsEnd(t *testing.T) {
	srv := threeMessagesOfAJob(t)
	ctx := context.Background()
	log := snats.EventLog(srv.JS)
	msgs, err := log.Subject(snats.EventSubjectPrefix+"job").Get(ctx, 1, 3)
	require.NoError(t, err)
	require.Len(t, msgs, 3)
	none, err := log.Subject(snats.EventSubjectPrefix+"other").Get(ctx, 1, 3)
	require.NoError(t, err, "a subject with no messages is an empty range")
	require.Empty(t, none)

	expired, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel()
	msgs, err = log.Get(expired, 1, 3)
	require.Error(t, err, "read %d of 3 messages and said nothing", len(msgs))
}

// TestLogFollow: Follow hands over what the log holds after a sequence,
// then each message as it is stored, each saying how many came after it.
func TestLogFollow(t *testing.T) {
	srv := threeMessagesOfAJob(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	got := make(chan snats.Message, 10)
	done := make(chan error, 1)
	go func() {
		done <- snats.EventLog(srv.JS).Follow(ctx, 1, func(m snats.Message) error {
			got <- m
			return nil
		})
	}()
	for _, want := range []struct{ seq, pending uint64 }{{2, 1}, {3, 0}} {
		m := <-got
		require.Equal(t, want.seq, m.Seq)
		require.Equal(t, want.pending, m.Pending)
		require.Equal(t, snats.EventSubjectPrefix+"job", m.Subject)
	}
	_, err := srv.JS.Publish(ctx, snats.EventSubjectPrefix+"next", []byte("{}"))
	require.NoError(t, err)
	m := <-got
	require.EqualValues(t, 4, m.Seq, "a message stored while it follows")
	require.False(t, m.Time.IsZero())
	cancel()
	require.Error(t, <-done)

	stop := errors.New("enough")
	err = snats.EventLog(srv.JS).Follow(t.Context(), 0, func(snats.Message) error { return stop })
	require.ErrorIs(t, err, stop, "fn's error ends it")
}

// threeMessagesOfAJob is a server whose event log holds three messages on
// the subject of job "job".
func threeMessagesOfAJob(t *testing.T) *natstest.Server {
	t.Helper()
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	for range 3 {
		_, err := srv.JS.Publish(ctx, snats.EventSubjectPrefix+"job", []byte("{}"))
		require.NoError(t, err)
	}
	return srv
}
