package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EventStoreOptions configure an EventStore. The zero value fits the
// SERP_EVENTS stream as EnsureEventStream makes it.
type EventStoreOptions struct {
	// Stream is the events stream; default EventStream.
	Stream string
	// SubjectPrefix is put before a job id to make its subject; default
	// EventSubjectPrefix.
	SubjectPrefix string
	// LoadBatch is how many messages one direct get returns; default 256.
	LoadBatch int
	// MaxBatch is the most messages in one atomic batch; default 1000, the
	// server's default limit (max_batch_size).
	MaxBatch int
	// PipelineMax is the most appends of a group commit that are
	// published as plain messages, all in flight at once, instead of as
	// one atomic batch, when each of them is a single message: default
	// DefaultPipelineMax; negative for always an atomic batch. A group of
	// one message each needs no batch to stay all or none per job, and a
	// small one is cheaper as plain messages (see AppendMany).
	PipelineMax int
	// MaxAttempts bounds the publishes of one append whose outcome stays
	// unclear; default 8.
	MaxAttempts int
	// AttemptTimeout bounds one publish, and the re-read after it, so a
	// request lost with a failed server does not hold the append until
	// ctx ends; default the JetStream context's timeout (5 s).
	AttemptTimeout time.Duration
	// RetryBackoff is the first pause between such attempts; it doubles
	// up to one second. Default 25 ms.
	RetryBackoff time.Duration
	// Logger receives retries and their reasons; nil for none.
	Logger *slog.Logger
}

// EventStore is the JetStream event store. It is safe for concurrent use.
type EventStore struct {
	js         jetstream.JetStream
	nc         *natsgo.Conn
	opts       EventStoreOptions
	maxMsgSize int // the stream's limit, 0 for none
	log        *slog.Logger
}

// NewEventStore returns the event store on an existing stream (see
// EnsureEventStream). The stream must allow direct gets and atomic
// publishes.
func NewEventStore(ctx context.Context, js jetstream.JetStream, opts EventStoreOptions) (*EventStore, error) {
	if opts.Stream == "" {
		opts.Stream = EventStream
	}
	if opts.SubjectPrefix == "" {
		opts.SubjectPrefix = EventSubjectPrefix
	}
	if opts.LoadBatch <= 0 {
		opts.LoadBatch = 256
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 1000
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 8
	}
	if opts.PipelineMax == 0 {
		opts.PipelineMax = DefaultPipelineMax
	}
	if opts.AttemptTimeout <= 0 {
		opts.AttemptTimeout = js.Options().DefaultTimeout
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = 25 * time.Millisecond
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, err := js.Stream(ctx, opts.Stream)
	if err != nil {
		return nil, fmt.Errorf("nats: event store on stream %s: %w", opts.Stream, err)
	}
	cfg := s.CachedInfo().Config
	var errs []error
	if !cfg.AllowDirect {
		errs = append(errs, errors.New("direct gets are not allowed (allow_direct)"))
	}
	if !cfg.AllowAtomicPublish {
		errs = append(errs, errors.New("atomic batches are not allowed (allow_atomic)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("nats: stream %s cannot hold events: %w", opts.Stream, err)
	}
	return &EventStore{
		js:         js,
		nc:         js.Conn(),
		opts:       opts,
		maxMsgSize: max(int(cfg.MaxMsgSize), 0),
		log:        log,
	}, nil
}

// MaxMessageSize is the largest message an append may write, headers
// included: the connection's max payload, or the stream's max message size
// if that is smaller.
func (s *EventStore) MaxMessageSize() int {
	limit := int(s.nc.MaxPayload())
	if s.maxMsgSize > 0 && s.maxMsgSize < limit {
		limit = s.maxMsgSize
	}
	return limit
}

func (s *EventStore) subject(jobID string) string { return s.opts.SubjectPrefix + jobID }

// apiPrefix is the JetStream API prefix of a JetStream context.
func apiPrefix(o jetstream.JetStreamOptions) string {
	switch {
	case o.APIPrefix != "":
		if o.APIPrefix[len(o.APIPrefix)-1] != '.' {
			return o.APIPrefix + "."
		}
		return o.APIPrefix
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	default:
		return "$JS.API."
	}
}
