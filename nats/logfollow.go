package nats

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Follow hands every message of l after sequence after to fn, in order,
// and then each new one as it is stored, until ctx ends, the consumer
// fails or fn returns an error (which it returns). It reads with an
// ordered consumer, which the client makes again after a disconnect or a
// missed heartbeat; the caller resumes after the last message it took by
// calling Follow again.
func (l Log) Follow(ctx context.Context, after uint64, fn func(Message) error) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{l.filter}}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := l.js.OrderedConsumer(ctx, l.stream, cfg)
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer func() {
		it.Stop()
		dropConsumer(ctx, l.js, l.stream, cons)
	}()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			return err
		}
		msg, err := delivered(m)
		if err != nil {
			return err
		}
		if err := fn(msg); err != nil {
			return err
		}
	}
}

// delivered is a message an ordered consumer delivered, with where it
// stands in the stream.
func delivered(m jetstream.Msg) (Message, error) {
	seq, pending, ts, ok := ackInfo(m.Reply())
	if !ok {
		meta, err := m.Metadata()
		if err != nil {
			return Message{}, err
		}
		seq, pending, ts = meta.Sequence.Stream, meta.NumPending, meta.Timestamp.UnixNano()
	}
	return Message{Seq: seq, Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Time: time.Unix(0, ts), Pending: pending}, nil
}
