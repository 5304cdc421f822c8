package nats

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestStreamChecksGuardDurability: a restart's flags never scale a
// stream down (fewer copies of the paid ledger), and a stream whose
// writes are acknowledged before they are synced is refused, not taken.
func TestStreamChecksGuardDurability(t *testing.T) {
	destructive := func(have, want jetstream.StreamConfig) map[string]bool {
		out := map[string]bool{}
		for _, d := range diffStreamConfig(want, have) {
			out[d.Field] = d.Destructive
		}
		return out
	}
	r3 := EventStreamConfig(3)
	require.Equal(t, map[string]bool{"replicas": true}, destructive(r3, EventStreamConfig(1)), "3 -> 1")
	require.Equal(t, map[string]bool{"replicas": false}, destructive(EventStreamConfig(1), r3), "1 -> 3")

	async := WorkStreamConfig(StreamOptions{})
	async.PersistMode = jetstream.AsyncPersistMode
	require.Equal(t, map[string]bool{"persist_mode": true}, destructive(async, WorkStreamConfig(StreamOptions{})))
}
