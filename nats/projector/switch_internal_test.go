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
