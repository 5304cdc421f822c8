package nats

import (
	"context"
	"errors"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// future is a publish's answer as a test sets it.
type future struct {
	ok  chan *jetstream.PubAck
	err chan error
}

func newFuture() future {
	return future{ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
}

func (f future) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f future) Err() <-chan error            { return f.err }
func (f future) Msg() *natsgo.Msg             { return nil }

// TestAwaitAckTakesAnAnswerAlreadyThere: an acknowledgement that came
// while an earlier append of the group was being settled is taken, even
// though the wait's deadline has passed since; with no answer, the
// deadline makes the append unclear (to be settled by re-reading).
func TestAwaitAckTakesAnAnswerAlreadyThere(t *testing.T) {
	msg := natsgo.NewMsg("serp.events.x")
	ended, cancel := context.WithCancel(context.Background())
	cancel()

	f := newFuture()
	f.ok <- &jetstream.PubAck{Sequence: 7}
	for range 100 { // a select between two ready cases picks at random
		a := awaitAck(ended, msg, f, nil)
		require.Equal(t, written, a.out)
		require.EqualValues(t, 7, a.seq)
		f.ok <- &jetstream.PubAck{Sequence: 7}
	}

	a := awaitAck(ended, msg, newFuture(), nil)
	require.Equal(t, unclear, a.out)
	require.ErrorIs(t, a.err, context.Canceled)

	f = newFuture()
	f.ok <- &jetstream.PubAck{Sequence: 9, Duplicate: true}
	require.Equal(t, duplicate, awaitAck(context.Background(), msg, f, nil).out)

	a = awaitAck(context.Background(), msg, nil, natsgo.ErrConnectionClosed)
	require.Equal(t, unclear, a.out, "a publish that did not leave on a closed connection")
	require.True(t, errors.Is(a.err, natsgo.ErrConnectionClosed))
}
