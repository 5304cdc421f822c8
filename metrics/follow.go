package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

// Follow feeds t from SERP_EVENTS, from the event after t.Seq(), until ctx
// ends. It reads with an ordered consumer (ephemeral, recreated by the
// client after a disconnect or a missed heartbeat, resuming where it
// stopped), so it needs only read access to the stream; a stream that is
// not there yet is waited for. log may be nil.
func Follow(ctx context.Context, js jetstream.JetStream, t *Tally, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retry := 100 * time.Millisecond
	for ctx.Err() == nil {
		cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{snats.EventSubjectPrefix + ">"}}
		if seq := t.Seq(); seq > 0 {
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, seq+1
		}
		cons, err := js.OrderedConsumer(ctx, snats.EventStream, cfg)
		if err == nil {
			var cc jetstream.ConsumeContext
			cc, err = cons.Consume(func(m jetstream.Msg) { apply(t, m) })
			if err == nil {
				select {
				case <-ctx.Done():
				case <-cc.Closed():
				}
				cc.Stop()
				<-cc.Closed()
			}
		}
		if ctx.Err() == nil {
			log.Debug("metrics: reading the event log failed; trying again", "err", err, "retry_in", retry)
		}
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
		retry = min(2*retry, 5*time.Second)
	}
}

// apply decodes one message of the log into t.
func apply(t *Tally, m jetstream.Msg) {
	meta, err := m.Metadata()
	if err != nil {
		return
	}
	e, err := projections.DecodeLight(m.Data())
	if err != nil {
		t.Undecodable(meta.Sequence.Stream)
		return
	}
	t.Apply(projections.Record{Seq: meta.Sequence.Stream, Event: e})
}
