package engine

import (
	"context"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// publishOnly takes records and says nothing of their size.
type publishOnly struct{}

func (publishOnly) PublishMsg(context.Context, *natsgo.Msg, ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	return &jetstream.PubAck{}, nil
}

// sized says how large a record it takes.
type sized struct {
	publishOnly
	limit int64
}

func (s sized) MaxPayload() int64 { return s.limit }

// TestRejectionsMaxPayload: a record is sized to what its Rejections says
// it takes, or to the NATS server's default.
func TestRejectionsMaxPayload(t *testing.T) {
	require.EqualValues(t, 64<<10, maxPayload(sized{limit: 64 << 10}))
	require.EqualValues(t, 1<<20, maxPayload(publishOnly{}))
}
