package consume

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/engine"
)

// msg is a JetStream delivery as the engine's handlers take it. ackWait
// is its consumer's (zero if unknown).
type msg struct {
	jetstream.Msg
	ackWait time.Duration
}

var _ engine.Msg = msg{}

// Info reads the delivery's JetStream metadata.
func (m msg) Info() (engine.MsgInfo, error) {
	meta, err := m.Metadata()
	if err != nil {
		return engine.MsgInfo{}, err
	}
	return engine.MsgInfo{Stream: meta.Stream, Seq: meta.Sequence.Stream, Delivered: meta.NumDelivered, Stored: meta.Timestamp,
		AckWait: m.ackWait}, nil
}
