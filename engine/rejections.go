package engine

import (
	"context"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Rejections is where a refused command's record goes (the message on
// serp.rejected.<reason>, its message id the command's sequence). A
// jetstream.JetStream is one; the simulation has its own.
//
// A record is cut to fit the largest message the server takes: a
// Rejections with a MaxPayload() int64 method says it, one with a
// Conn() *nats.Conn (a jetstream.JetStream) has its connection say it, and
// any other takes the NATS server's default, 1 MiB.
type Rejections interface {
	PublishMsg(ctx context.Context, m *natsgo.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

var _ Rejections = jetstream.JetStream(nil)

// defaultMaxPayload is the NATS server's default max_payload.
const defaultMaxPayload = 1 << 20

// maxPayload is the largest message rec takes (see Rejections).
func maxPayload(rec Rejections) int64 {
	switch r := rec.(type) {
	case interface{ MaxPayload() int64 }:
		return r.MaxPayload()
	case interface{ Conn() *natsgo.Conn }:
		if nc := r.Conn(); nc != nil {
			return nc.MaxPayload()
		}
	}
	return defaultMaxPayload
}
