package nats

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAckInfo(t *testing.T) {
	tests := []struct {
		reply        string
		seq, pending uint64
		ts           int64
		ok           bool
	}{
		{"$JS.ACK.SERP_EVENTS.c.1.42.7.1733148000000000000.3", 42, 3, 1733148000000000000, true},
		{"$JS.ACK._.abc.SERP_EVENTS.c.1.42.7.1733148000000000000.0.xyz", 42, 0, 1733148000000000000, true},
		{"$JS.ACK.hub.abc.SERP_EVENTS.c.2.9.8.5.1", 9, 1, 5, true},
		{"_INBOX.x", 0, 0, 0, false},
		{"$JS.ACK.S.c.1.x.7.1.3", 0, 0, 1, false},
	}
	for _, tt := range tests {
		seq, pending, ts, ok := ackInfo(tt.reply)
		require.Equal(t, tt.ok, ok, tt.reply)
		if ok {
			require.Equal(t, []any{tt.seq, tt.pending, tt.ts}, []any{seq, pending, ts}, tt.reply)
		}
	}
}
