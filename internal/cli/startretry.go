package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Backoff between start-up tries: it doubles from the first to the last.
const (
	startFirstDelay = 250 * time.Millisecond
	startMaxDelay   = 10 * time.Second
)

// startState is why serpent run is not ready yet; /readyz shows it.
type startState struct {
	mu     sync.Mutex
	reason string
}

func (s *startState) set(reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reason = reason
}

func (s *startState) get() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reason
}

// starter tries the steps of a start-up that need NATS until they work.
// NATS may come up after the engine, and a cluster may be electing the
// leader of a stream; both pass.
type starter struct {
	state *startState
	log   *slog.Logger
	// deadline ends the tries (--connect-timeout); zero for none.
	deadline time.Time
	timeout  time.Duration
	tries    int
}

// keepTrying runs try until it succeeds, fails for a reason that waiting
// does not mend, or ctx ends or the deadline passes. Each failed try logs
// one line, and the waits between tries double up to startMaxDelay.
func (s *starter) keepTrying(ctx context.Context, what string, try func(context.Context) error) error {
	s.state.set(what)
	delay := startFirstDelay
	for {
		tctx, cancel := ctx, context.CancelFunc(func() {})
		if !s.deadline.IsZero() {
			tctx, cancel = context.WithDeadline(ctx, s.deadline)
		}
		err := try(tctx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !passing(err) {
			return err
		}
		s.tries++
		if !s.deadline.IsZero() && time.Now().Add(delay).After(s.deadline) {
			return fmt.Errorf("%s: NATS not ready within --connect-timeout %s: %w", what, s.timeout, err)
		}
		s.state.set(fmt.Sprintf("%s: %v (try %d; next in %s)", what, err, s.tries, delay))
		s.log.Warn("NATS not ready; trying again", "step", what, "try", s.tries, "retry_in", delay, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, startMaxDelay)
	}
}

// passing reports whether err is one that waiting may mend: no server
// reachable yet, JetStream not yet enabled, or no leader for a stream, a
// bucket or a consumer (a request that times out or has no responder).
func passing(err error) bool {
	var opErr *net.OpError
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, natsgo.ErrTimeout),
		errors.Is(err, natsgo.ErrNoServers), errors.Is(err, natsgo.ErrNoResponders),
		errors.Is(err, natsgo.ErrConnectionReconnecting), errors.Is(err, natsgo.ErrDisconnected),
		errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, jetstream.ErrNoStreamResponse), errors.As(err, &opErr):
		return true
	case errors.As(err, &apiErr):
		// 503: JetStream temporarily unavailable; 10005: no peers to place
		// a replica on (a node is down); 10118: the stream is offline.
		return apiErr.Code == 503 || apiErr.ErrorCode == 10005 || apiErr.ErrorCode == 10118
	}
	return false
}
