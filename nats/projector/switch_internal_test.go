package projector

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// doneFuture is a publish whose answer has come: stored, or refused.
type doneFuture struct {
	jetstream.PubAckFuture
	ok  chan *jetstream.PubAck
	err chan error
}

func future(err error) doneFuture {
	f := doneFuture{ok: make(chan *jetstream.PubAck, 1), err: make(chan error, 1)}
	if err != nil {
		f.err <- err
	} else {
		f.ok <- &jetstream.PubAck{}
	}
	return f
}

func (f doneFuture) Ok() <-chan *jetstream.PubAck { return f.ok }
func (f doneFuture) Err() <-chan error            { return f.err }

// TestSwitchCountsOnlyStoredWrites: a switch's count of values written
// leaves out the writes the server refused (a value changed meanwhile),
// which the switch reports as its error.
func TestSwitchCountsOnlyStoredWrites(t *testing.T) {
	n, err := waitWrites(context.Background(), []pendingWrite{
		{key: "serp_status/a", fut: future(nil)},
		{key: "serp_status/b", fut: future(jetstream.ErrKeyExists)},
		{key: "serp_status/c", fut: future(nil)},
	})
	require.Equal(t, 2, n)
	require.ErrorContains(t, err, "serp_status/b: it changed during the switch")
}
