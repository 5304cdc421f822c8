package nats

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// TailEvents hands every message of SERP_EVENTS after sequence after to
// fn, in order, and then each new one as it is stored, until ctx ends,
// the consumer fails or fn returns an error (which it returns). It reads
// with an ordered consumer, so it needs only read access to the stream;
// the caller resumes after the last message it took by calling it again.
func TailEvents(ctx context.Context, js jetstream.JetStream, after uint64, fn func(jetstream.Msg) error) error {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{EventSubjectPrefix + ">"}}
	if after > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, after+1
	}
	cons, err := js.OrderedConsumer(ctx, EventStream, cfg)
	if err != nil {
		return err
	}
	it, err := cons.Messages()
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		m, err := it.Next()
		if err != nil {
			return err
		}
		if err := fn(m); err != nil {
			return err
		}
	}
}
