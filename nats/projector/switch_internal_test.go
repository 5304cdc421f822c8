package projector

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// cutWatch is a bucket whose watch sends some entries and then ends
// without the marker that says every value was sent, as a watch does
// when its consumer cannot be made again.
type cutWatch struct {
	jetstream.KeyValue
	entries []jetstream.KeyValueEntry
}

func (c cutWatch) Bucket() string { return "cut" }

func (c cutWatch) WatchAll(context.Context, ...jetstream.WatchOpt) (jetstream.KeyWatcher, error) {
	ch := make(chan jetstream.KeyValueEntry, len(c.entries))
	for _, e := range c.entries {
		ch <- e
	}
	close(ch)
	return cutWatcher(ch), nil
}

type cutWatcher chan jetstream.KeyValueEntry

func (w cutWatcher) Updates() <-chan jetstream.KeyValueEntry { return w }
func (w cutWatcher) Stop() error                             { return nil }

type cutEntry struct {
	jetstream.KeyValueEntry
	key string
}

func (e cutEntry) Key() string                     { return e.key }
func (e cutEntry) Value() []byte                   { return []byte("v") }
func (e cutEntry) Revision() uint64                { return 1 }
func (e cutEntry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }

// TestCutWatchIsNotTheWholeBucket: a watch that ends before its marker is
// an error, so a switch-over never deletes the live keys it did not get
// to see.
func TestCutWatchIsNotTheWholeBucket(t *testing.T) {
	kv := cutWatch{entries: []jetstream.KeyValueEntry{cutEntry{key: "a"}, cutEntry{key: "b"}}}
	var seen []string
	err := eachValue(context.Background(), kv, func(e jetstream.KeyValueEntry) error {
		seen = append(seen, e.Key())
		return nil
	})
	require.ErrorIs(t, err, errWatchCut)
	require.Equal(t, []string{"a", "b"}, seen)
	_, err = indexLive(context.Background(), kv)
	require.ErrorIs(t, err, errWatchCut)
}

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
