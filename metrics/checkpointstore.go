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
// the serp_metrics bucket, and returns the stream sequence t resumes after
// and the log t counts (its stream's creation time, which tells it apart
// from a log made again under the same name; SaveCheckpoint and
// KeepCheckpoint write checkpoints of that log only). The sequence is 0,
// and t left as it was, when there is no checkpoint, or none t can take
// (ErrCheckpoint: another format, another log, a sequence past the log's
// end, a tally set otherwise, parts missing or not those the head names).
// Follow then reads the log from there.
func Resume(ctx context.Context, js jetstream.JetStream, t *Tally) (uint64, time.Time, error) {
	info, err := logInfo(ctx, js)
	if err != nil {
		return 0, time.Time{}, err
	}
	log := info.Created
	kv, err := js.KeyValue(ctx, snats.MetricsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, log, nil
	}
	if err != nil {
		return 0, log, fmt.Errorf("metrics: bucket %s: %w", snats.MetricsBucket, err)
	}
	// A head replaced while its parts are read may have had them purged:
	// the newer head is read then.
	for try := 1; ; try++ {
		e, err := kv.Get(ctx, snats.MetricsCheckpointKey)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, log, nil
		}
		if err != nil {
			return 0, log, fmt.Errorf("metrics: checkpoint: %w", err)
		}
		b := e.Value()
		var c checkpointHead
		if json.Unmarshal(b, &c) == nil {
			if c.Seq > info.State.LastSeq {
				// The log ends before it: not the log it was written of.
				return 0, log, fmt.Errorf("%w: at sequence %d, past the log's end at %d", ErrCheckpoint, c.Seq, info.State.LastSeq)
			}
			if c.Parts != nil && c.Format == CheckpointFormat {
				b, err = readParts(ctx, kv, *c.Parts)
				if errors.Is(err, errPartMissing) && try < 3 {
					continue
				}
				if errors.Is(err, errPartMissing) {
					return 0, log, fmt.Errorf("%w: %v", ErrCheckpoint, err)
				}
				if err != nil {
					return 0, log, err
				}
			}
		}
		if err := t.RestoreCheckpoint(b, log); err != nil {
			return 0, log, err
		}
		return t.Seq(), log, nil
	}
}

// SaveCheckpoint writes t's checkpoint, of the log t counts (log, as
// Resume returned it), to the serp_metrics bucket, unless the one there
// is as far along and one t could take (another engine wrote it); it
// reports whether it wrote. It writes nothing if the stream is no longer
// that log (it was made again meanwhile): what t counted is not of the
// log there now. Engines share the one checkpoint: every tally folds the
// same log the same way.
//
// A checkpoint larger than a KV value holds is written in parts, its head
// last. Once a head is written, the parts of the checkpoints it replaced
// are purged; an error doing so comes with written true, and the
// checkpoint stands.
func SaveCheckpoint(ctx context.Context, js jetstream.JetStream, t *Tally, log time.Time) (bool, error) {
	info, err := logInfo(ctx, js)
	if err != nil {
		return false, err
	}
	if !info.Created.Equal(log) {
		return false, fmt.Errorf("metrics: checkpoint not written: %s was made again (at %s) after this tally began counting it",
			snats.EventStream, info.Created.UTC().Format(time.RFC3339Nano))
	}
	kv, err := js.KeyValue(ctx, snats.MetricsBucket)
	if err != nil {
		return false, fmt.Errorf("metrics: bucket %s: %w", snats.MetricsBucket, err)
	}
	b, seq, err := t.checkpoint(log)
	if err != nil {
		return false, err
	}
	forget := t.forgets()
	// farther reports whether the checkpoint there is one a tally could
	// take and as far along as t's.
	farther := func(e jetstream.KeyValueEntry) bool {
		// One a tally could not take (Resume would refuse it) is
		// written over whatever its sequence.
		var there checkpointHead
		return json.Unmarshal(e.Value(), &there) == nil && there.Format == CheckpointFormat && there.Log.Equal(log) &&
			there.Forget == forget && there.Seq <= info.State.LastSeq && there.Seq >= seq
	}
	e, err := kv.Get(ctx, snats.MetricsCheckpointKey)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, fmt.Errorf("metrics: checkpoint: %w", err)
	}
	if err == nil && farther(e) {
		return false, nil
	}
	head, keep := b, ""
	if size := sizeOfParts(js); len(b) > size {
		parts, err := writeParts(ctx, kv, b, seq, size)
		if err != nil {
			return false, err
		}
		head, err = json.Marshal(checkpointHead{Format: CheckpointFormat, Log: log.UTC(), Seq: seq, Forget: forget, Parts: parts})
		if err != nil {
			return false, fmt.Errorf("metrics: checkpoint: %w", err)
		}
		keep = parts.ID
	}
	written, err := saveHead(ctx, kv, head, farther)
	if !written {
		// Its parts, if any, are purged by the engine whose head is
		// written at or past seq.
		return false, err
	}
	if err := purgeParts(ctx, js, seq, keep); err != nil {
		return true, err
	}
	return true, nil
}

// saveHead writes head under the key tally, unless farther says the one
// there is as far along.
func saveHead(ctx context.Context, kv jetstream.KeyValue, head []byte, farther func(jetstream.KeyValueEntry) bool) (bool, error) {
	for range 3 {
		e, err := kv.Get(ctx, snats.MetricsCheckpointKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = kv.Create(ctx, snats.MetricsCheckpointKey, head)
		case err != nil:
			return false, fmt.Errorf("metrics: checkpoint: %w", err)
		case farther(e):
			return false, nil
		default:
			_, err = kv.Update(ctx, snats.MetricsCheckpointKey, head, e.Revision())
		}
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return false, fmt.Errorf("metrics: checkpoint: %w", err)
		}
		// Written meanwhile by another engine: compare with that one.
	}
	return false, errors.New("metrics: checkpoint not written: other engines wrote it three times meanwhile")
}

// KeepCheckpoint saves t's checkpoint of log (SaveCheckpoint) every
// interval while t has moved past the last one saved, and once more when
// ctx ends, until then. from is the sequence of the checkpoint t was
// restored from (as Resume returned it; 0 for none): t is saved once it
// is past that, however far t had counted when KeepCheckpoint began. A
// zero log, when Resume could not read the stream, is the stream's as the
// first save finds it. A save that fails is tried at the next tick, and
// logged as a warning when saves begin to fail: the checkpoint only spares
// an engine that starts some reading.
func KeepCheckpoint(ctx context.Context, js jetstream.JetStream, t *Tally, log time.Time, from uint64, every time.Duration, logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if every <= 0 {
		every = DefaultCheckpointEvery
	}
	saved, failing, leaving := from, false, false
	save := func(ctx context.Context) {
		seq := t.Seq()
		if seq <= saved {
			return
		}
		if log.IsZero() {
			info, err := logInfo(ctx, js)
			if err != nil {
				logger.Debug("metrics: saving the checkpoint failed", "seq", seq, "err", err)
				return
			}
			log = info.Created
		}
		written, err := SaveCheckpoint(ctx, js, t, log)
		if written && err != nil {
			level := slog.LevelWarn
			if leaving {
				level = slog.LevelDebug
			}
			logger.Log(ctx, level, "metrics: the checkpoint is saved, but the parts of older ones are left in the bucket", "seq", seq, "err", err)
		}
		leaving = written && err != nil
		if err != nil && !written {
			if !failing {
				logger.Warn("metrics: saving the checkpoint failed; an engine that starts will count the log from an older one", "seq", seq, "err", err)
			} else {
				logger.Debug("metrics: saving the checkpoint failed", "seq", seq, "err", err)
			}
			failing = true
			return
		}
		saved, failing = seq, false
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

// logInfo is the event stream's information: its creation time tells a
// log apart from one made again under the same name.
func logInfo(ctx context.Context, js jetstream.JetStream) (*jetstream.StreamInfo, error) {
	st, err := js.Stream(ctx, snats.EventStream)
	if err != nil {
		return nil, fmt.Errorf("metrics: stream %s: %w", snats.EventStream, err)
	}
	return st.CachedInfo(), nil
}
