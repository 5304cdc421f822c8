package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The event stream's name and subjects.
const (
	EventStream        = "SERP_EVENTS"
	EventSubjectPrefix = "serp.events."
)

// EventStreamOptions configure the SERP_EVENTS stream.
type EventStreamOptions struct {
	// Replicas is the number of copies; 0 means 1. Use 3 on a 3-node
	// cluster.
	Replicas int
	// AllowUpdate lets EnsureEventStream change an existing stream in
	// place (--update-streams).
	AllowUpdate bool
	// Logger is told what an update changed; nil for none.
	Logger *slog.Logger
}

// EventStreamConfig is the SERP_EVENTS stream serpent wants: an
// append-only log (deletes and purges denied, no limits), file storage,
// direct gets for loading jobs, atomic batches for multi-event appends,
// a 2-minute duplicate window for retried appends, and per-message TTLs:
// every message of a job carries the TTL that makes the server remove it
// at the job's expiry (the retention horizon). SERP_ARCHIVE keeps a copy.
func EventStreamConfig(replicas int) jetstream.StreamConfig {
	if replicas <= 0 {
		replicas = 1
	}
	return jetstream.StreamConfig{
		Name:               EventStream,
		Description:        "serpent: every event of every job, one subject per job",
		Subjects:           []string{EventSubjectPrefix + ">"},
		Storage:            jetstream.FileStorage,
		Retention:          jetstream.LimitsPolicy,
		Discard:            jetstream.DiscardOld,
		MaxAge:             0,
		MaxBytes:           -1,
		MaxMsgs:            -1,
		MaxMsgsPerSubject:  -1,
		Replicas:           replicas,
		Duplicates:         2 * time.Minute,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		DenyDelete:         true,
		DenyPurge:          true,
		AllowMsgTTL:        true,
	}
}

// EnsureEventStream creates SERP_EVENTS or checks that it is as serpent
// wants it; see EnsureStream.
func EnsureEventStream(ctx context.Context, js jetstream.JetStream, opts EventStreamOptions) (jetstream.Stream, error) {
	return ensureStream(ctx, js, EventStreamConfig(opts.Replicas), opts.AllowUpdate, opts.Logger)
}

// EnsureStream makes a stream as wanted, idempotently, at start-up. A
// missing stream is created. An existing one is compared on the fields
// serpent sets (server-filled defaults are ignored); if they differ, a
// *StreamConfigError lists each difference, unless allowUpdate is set: then
// the stream is updated in place, but changes that would lose data or that
// JetStream cannot make (storage type, retention, removing subjects,
// tighter limits, lifting deny-delete or deny-purge) are still refused.
func EnsureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, allowUpdate bool) (jetstream.Stream, error) {
	return ensureStream(ctx, js, want, allowUpdate, nil)
}

// ensureStream is EnsureStream that tells log what an update changed.
// Fields named in tighten may get a new or tighter limit with
// allowUpdate: the operator asked for it (the retention horizon on the
// command streams).
func ensureStream(ctx context.Context, js jetstream.JetStream, want jetstream.StreamConfig, allowUpdate bool, log *slog.Logger, tighten ...string) (jetstream.Stream, error) {
	for range 2 {
		s, err := js.Stream(ctx, want.Name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s, err = js.CreateStream(ctx, want)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue // created meanwhile by another instance: compare
			}
			if err != nil {
				return nil, fmt.Errorf("nats: create stream %s: %w", want.Name, err)
			}
			return s, nil
		}
		if err != nil {
			return nil, fmt.Errorf("nats: look up stream %s: %w", want.Name, err)
		}
		have := s.CachedInfo().Config
		diffs := diffStreamConfig(want, have)
		if len(diffs) == 0 {
			return s, nil
		}
		for i := range diffs {
			if slices.Contains(tighten, diffs[i].Field) {
				diffs[i].Destructive = false
			}
		}
		cerr := &StreamConfigError{Stream: want.Name, Diffs: diffs, UpdateAllowed: allowUpdate}
		if !allowUpdate || cerr.destructive() {
			return nil, cerr
		}
		s, err = js.UpdateStream(ctx, mergeStreamConfig(have, want, diffs))
		if err != nil {
			return nil, fmt.Errorf("nats: update stream %s (%s): %w", want.Name, cerr.list(false), err)
		}
		if log != nil {
			log.Info("nats: stream updated", "stream", want.Name, "changes", cerr.list(false))
		}
		return s, nil
	}
	return nil, fmt.Errorf("nats: stream %s keeps appearing and disappearing", want.Name)
}

// StreamConfigError says how an existing stream differs from what serpent
// wants.
type StreamConfigError struct {
	Stream        string
	Diffs         []FieldDiff
	UpdateAllowed bool
}

// FieldDiff is one differing field of a stream configuration.
type FieldDiff struct {
	Field string
	Have  string
	Want  string
	// Destructive changes are never made in place: they would lose data,
	// weaken the log's guarantees, or JetStream refuses them.
	Destructive bool
}

func (e *StreamConfigError) destructive() bool {
	for _, d := range e.Diffs {
		if d.Destructive {
			return true
		}
	}
	return false
}

func (e *StreamConfigError) list(destructiveOnly bool) string {
	var parts []string
	for _, d := range e.Diffs {
		if !destructiveOnly || d.Destructive {
			parts = append(parts, fmt.Sprintf("%s=%s, serpent wants %s", d.Field, d.Have, d.Want))
		}
	}
	return strings.Join(parts, "; ")
}

func (e *StreamConfigError) Error() string {
	if e.destructive() {
		return fmt.Sprintf("nats: stream %s exists with %s; serpent will not change that in place, since it would lose data or JetStream cannot do it: migrate the stream by hand",
			e.Stream, e.list(e.UpdateAllowed))
	}
	return fmt.Sprintf("nats: stream %s exists with %s; rerun with --update-streams to change it", e.Stream, e.list(false))
}
