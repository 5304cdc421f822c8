package sim

import (
	"bytes"
	"context"
	"errors"
	"strconv"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
)

// taskRejections is SERP_REJECTED as one intake task sees it: the engine
// publishes a refused command's record there (worker.Rejections). The
// scheduler may fail the publish (nothing recorded, the command is asked
// again) or kill the process first.
type taskRejections struct {
	w *World
	t *task
}

var _ engine.Rejections = taskRejections{}

// MaxPayload is the NATS server's default max_payload.
func (r taskRejections) MaxPayload() int64 { return 1 << 20 }

func (r taskRejections) PublishMsg(_ context.Context, m *natsgo.Msg, _ ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if err := r.w.recordRejection(r.t, m.Header.Get(engine.HeaderRejectReason)); err != nil {
		return nil, err
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	// The record must be the command's: its sequence, its payload.
	seq := strconv.FormatUint(r.t.msg.seq, 10)
	if got := m.Header.Get(engine.HeaderCommandSeq); got != seq {
		r.w.rep.fail("command %s: its rejection record names command %s", seq, got)
	}
	if id := m.Header.Get(natsgo.MsgIdHdr); id != "rejected-"+seq {
		r.w.rep.fail("command %s: its rejection record's message id is %q", seq, id)
	}
	payload := r.t.msg.cmd.payload
	carried := bytes.Equal(m.Data, payload)
	if m.Header.Get(engine.HeaderCommandBytes) == strconv.Itoa(len(payload)) {
		carried = bytes.HasPrefix(payload, m.Data) // cut to fit a message, its size and digest in headers
	}
	if !carried {
		r.w.rep.fail("command %s: its rejection record does not carry its payload", seq)
	}
	return &jetstream.PubAck{Stream: snats.RejectStream, Sequence: r.t.msg.seq}, nil
}

// errRejectFailed is a rejection record the scheduler did not let through.
var errRejectFailed = errors.New("sim: SERP_REJECTED is unreachable")

// recordRejection records that t's command was refused for reason, once the
// scheduler lets it (ptReject). One record per command: its sequence is the
// record's message id, so a second is the same record.
func (w *World) recordRejection(t *task, reason string) error {
	switch w.yield(t, ptReject) {
	case vDead:
		return errDead
	case vFail:
		return errRejectFailed
	}
	w.mu.Lock()
	t.msg.cmd.rejected = reason
	w.mu.Unlock()
	return nil
}
