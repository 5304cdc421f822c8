package chaos

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// readAll calls fn with every message of stream matching filter, in
// order, with one ordered consumer (no per-message requests).
func readAll(ctx context.Context, js jetstream.JetStream, stream, filter string, fn func(jetstream.Msg) error) error {
	s, err := js.Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("chaos: stream %s: %w", stream, err)
	}
	if s.CachedInfo().State.Msgs == 0 {
		return nil
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return fmt.Errorf("chaos: read %s: %w", stream, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return fmt.Errorf("chaos: read %s: %w", stream, err)
	}
	if info.NumPending == 0 {
		return nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(1000))
	if err != nil {
		return fmt.Errorf("chaos: read %s: %w", stream, err)
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			return fmt.Errorf("chaos: read %s: %w", stream, err)
		}
		if err := fn(msg); err != nil {
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		if meta.NumPending == 0 {
			return nil
		}
	}
}
