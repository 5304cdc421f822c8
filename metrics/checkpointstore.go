package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
)

// DefaultCheckpointEvery is how often KeepCheckpoint writes a tally that
// moved.
const DefaultCheckpointEvery = 30 * time.Second

// Resume restores t, before it applies anything, from the checkpoint in
// the serp_metrics bucket, and returns the stream sequence t resumes
// after: 0, and t left as it was, when there is none, or none t can take
// (ErrCheckpoint: another format, another log, a sequence past the log's
// end, a tally set otherwise). Follow then reads the log from there.
func Resume(ctx context.Context, js jetstream.JetStream, t *Tally) (uint64, error) {
	st, err := js.Stream(ctx, snats.EventStream)
	if err != nil {
		return 0, fmt.Errorf("metrics: stream %s: %w", snats.EventStream, err)
	}
	info := st.CachedInfo()
	kv, err := js.KeyValue(ctx, snats.MetricsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("metrics: bucket %s: %w", snats.MetricsBucket, err)
	}
	e, err := kv.Get(ctx, snats.MetricsCheckpointKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("metrics: checkpoint: %w", err)
	}
	var c struct {
		Seq uint64 `json:"seq"`
	}
	if json.Unmarshal(e.Value(), &c) == nil && c.Seq > info.State.LastSeq {
		// The log ends before it: not the log it was written of.
		return 0, fmt.Errorf("%w: at sequence %d, past the log's end at %d", ErrCheckpoint, c.Seq, info.State.LastSeq)
	}
	if err := t.RestoreCheckpoint(e.Value(), info.Created); err != nil {
		return 0, err
	}
	return t.Seq(), nil
}

// SaveCheckpoint writes t's checkpoint to the serp_metrics bucket, unless
// the one there, of the same log and format, is as far along (another
// engine wrote it); it reports whether it wrote. Engines share the one
// checkpoint: every tally folds the same log the same way.
func SaveCheckpoint(ctx context.Context, js jetstream.JetStream, t *Tally) (bool, error) {
	created, err := logCreated(ctx, js)
	if err != nil {
		return false, err
	}
	kv, err := js.KeyValue(ctx, snats.MetricsBucket)
	if err != nil {
		return false, fmt.Errorf("metrics: bucket %s: %w", snats.MetricsBucket, err)
	}
	b, seq, err := t.checkpoint(created)
	if err != nil {
		return false, err
	}
	for range 3 {
		e, err := kv.Get(ctx, snats.MetricsCheckpointKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = kv.Create(ctx, snats.MetricsCheckpointKey, b)
		case err != nil:
			return false, fmt.Errorf("metrics: checkpoint: %w", err)
		default:
			var there checkpoint
			if json.Unmarshal(e.Value(), &there) == nil && there.Format == CheckpointFormat &&
				there.Log.Equal(created) && there.Seq >= seq {
				return false, nil
			}
			_, err = kv.Update(ctx, snats.MetricsCheckpointKey, b, e.Revision())
		}
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return false, fmt.Errorf("metrics: checkpoint: %w", err)
		}
		// Written meanwhile by another engine: compare with that one.
	}
	return false, nil
}

// KeepCheckpoint saves t's checkpoint (SaveCheckpoint) every interval
// while t moves on, and once more when ctx ends, until then. A save that
// fails is logged and tried at the next tick: the checkpoint only spares
// an engine that starts some reading.
func KeepCheckpoint(ctx context.Context, js jetstream.JetStream, t *Tally, every time.Duration, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if every <= 0 {
		every = DefaultCheckpointEvery
	}
	saved := t.Seq()
	save := func(ctx context.Context) {
		seq := t.Seq()
		if seq <= saved {
			return
		}
		if _, err := SaveCheckpoint(ctx, js, t); err != nil {
			log.Debug("metrics: saving the checkpoint failed", "seq", seq, "err", err)
			return
		}
		saved = seq
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			save(sctx)
			cancel()
			return
		case <-tick.C:
			save(ctx)
		}
	}
}

// logCreated is the event log's creation time, which tells it apart from
// a log made again under the same name.
func logCreated(ctx context.Context, js jetstream.JetStream) (time.Time, error) {
	st, err := js.Stream(ctx, snats.EventStream)
	if err != nil {
		return time.Time{}, fmt.Errorf("metrics: stream %s: %w", snats.EventStream, err)
	}
	return st.CachedInfo().Created, nil
}
