package nats

import (
	"context"
	"errors"
	"fmt"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// outcome is what a publish told us, before any re-read.
type outcome int

const (
	written   outcome = iota // acknowledged: the sequence is known
	duplicate                // a duplicate ack or a batch refused for a known message id
	conflict                 // wrong last sequence (10071)
	unclear                  // anything that does not settle the outcome
	failed                   // refused for good; retrying cannot help
)

// JetStream error codes the store acts on (see the server's errors.json).
const (
	errWrongLastSequence         jetstream.ErrorCode = 10071
	errWrongLastSequenceConstant jetstream.ErrorCode = 10164 // another write to the subject is in flight
	errDuplicateInProcess        jetstream.ErrorCode = 10158
	errMessageTooLarge           jetstream.ErrorCode = 10054
	errBatchIncomplete           jetstream.ErrorCode = 10176
	errBatchDuplicateMsgID       jetstream.ErrorCode = 10201
	errAtomicTooManyInflight     jetstream.ErrorCode = 10210
	errBatchTooManyInflight      jetstream.ErrorCode = 10211
)

// wireMsgs turns an append's messages into NATS messages on subject.
func wireMsgs(subject string, msgs []eventstore.Message) []*natsgo.Msg {
	out := make([]*natsgo.Msg, len(msgs))
	for i, m := range msgs {
		h := make(natsgo.Header, len(m.Header))
		for k, v := range m.Header {
			h[k] = v
		}
		out[i] = &natsgo.Msg{Subject: subject, Header: h, Data: m.Data}
	}
	return out
}

// publish sends one plain message or an atomic batch and returns the
// sequence of the last message written.
func (s *EventStore) publish(ctx context.Context, msgs []*natsgo.Msg) (uint64, outcome, error) {
	if len(msgs) == 1 {
		ack, err := s.js.PublishMsg(ctx, msgs[0])
		a := acked(msgs[0], ack, err)
		return a.seq, a.out, a.err
	}
	ack, err := jetstreamext.PublishMsgBatch(ctx, s.js, msgs)
	if err != nil {
		out, err := classify(err)
		return 0, out, err
	}
	if ack.BatchSize != uint64(len(msgs)) {
		return 0, unclear, fmt.Errorf("batch of %d messages acknowledged with count %d", len(msgs), ack.BatchSize)
	}
	return ack.Sequence, written, nil
}

// acked reads the answer to a plain publish of msg.
func acked(msg *natsgo.Msg, ack *jetstream.PubAck, err error) answer {
	switch {
	case err != nil:
		out, err := classify(err)
		return answer{out: out, err: err}
	case ack.Duplicate:
		return answer{seq: ack.Sequence, out: duplicate,
			err: fmt.Errorf("the server already has message id %s at sequence %d", msg.Header.Get(events.HeaderMsgID), ack.Sequence)}
	}
	return answer{seq: ack.Sequence, out: written}
}

// classify sorts a publish error.
func classify(err error) (outcome, error) {
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case errWrongLastSequence:
			return conflict, err
		case errBatchDuplicateMsgID:
			return duplicate, err
		case errWrongLastSequenceConstant, errDuplicateInProcess, errBatchIncomplete,
			errAtomicTooManyInflight, errBatchTooManyInflight:
			return unclear, err
		case errMessageTooLarge:
			return failed, fmt.Errorf("%w: %w", eventstore.ErrTooLarge, err)
		}
		if api.Code >= 500 || api.Code == 408 || api.Code == 429 {
			return unclear, err // the server is busy or electing a leader
		}
		return failed, err
	}
	switch {
	case errors.Is(err, natsgo.ErrMaxPayload):
		return failed, fmt.Errorf("%w: %w", eventstore.ErrTooLarge, err)
	case errors.Is(err, natsgo.ErrBadSubject), errors.Is(err, natsgo.ErrInvalidConnection):
		return failed, err
	}
	// A connection closed while the write was on its way (the process
	// shutting down) may have delivered it: unclear, like a lost ack.
	// Timeouts, no responders, disconnections, garbled acks: the write
	// may or may not have happened.
	return unclear, err
}
