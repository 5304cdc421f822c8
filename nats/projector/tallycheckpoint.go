package projector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

// DefaultTallyCheckpointEvery is how often KeepTallyCheckpoint writes a
// tally that moved.
const DefaultTallyCheckpointEvery = 30 * time.Second

// ResumeTally restores t, before it applies anything, from the checkpoint
// in the serp_metrics bucket, and returns the stream sequence t resumes
// after and the log t counts (its stream's creation time, which tells it
// apart from a log made again under the same name; SaveTallyCheckpoint
// and KeepTallyCheckpoint write checkpoints of that log only). The
// sequence is 0, and t left as it was, when there is no checkpoint, or
// none t can take (projections.ErrTallyCheckpoint: another format,
// another log, a sequence past the log's end, a tally set otherwise,
// parts missing or not those the head names). FollowTally then reads the
// log from there. A head whose parts are missing or damaged is deleted,
// so that the next save writes one anew.
func ResumeTally(ctx context.Context, js jetstream.JetStream, t *projections.Tally) (uint64, time.Time, error) {
	info, err := logInfo(ctx, js)
	if err != nil {
		return 0, time.Time{}, err
	}
	log, end := info.Created, logEnd(ctx, js, info)
	t.CountsLog(log) // what Follow reads from now on must be this log
	kv, err := js.KeyValue(ctx, snats.MetricsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, log, nil
	}
	if err != nil {
		return 0, log, fmt.Errorf("metrics: bucket %s: %w", snats.MetricsBucket, err)
	}
	for try := 1; ; try++ {
		e, err := kv.Get(ctx, snats.MetricsCheckpointKey)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return 0, log, nil
		}
		if err != nil {
			return 0, log, fmt.Errorf("metrics: checkpoint: %w", err)
		}
		var c checkpointHead
		if err := json.Unmarshal(e.Value(), &c); err != nil {
			return 0, log, fmt.Errorf("%w: %v", projections.ErrTallyCheckpoint, err)
		}
		if last, err := end(c.Seq); err != nil {
			return 0, log, err
		} else if c.Seq > last {
			// The log ends before it: not the log it was written of.
			return 0, log, fmt.Errorf("%w: at sequence %d, past the log's end at %d", projections.ErrTallyCheckpoint, c.Seq, last)
		}
		if c.Parts == nil {
			if err := t.RestoreCheckpoint(e.Value(), log); err != nil {
				return 0, log, err
			}
			return t.Seq(), log, nil
		}
		if err := c.refused(log, t.Forgets()); err != nil {
			return 0, log, err
		}
		if c.Parts.Bytes > projections.MaxTallyCheckpointBytes { // a later version's, maybe
			return 0, log, fmt.Errorf("%w: of %d bytes, over %d", projections.ErrTallyCheckpoint, c.Parts.Bytes, projections.MaxTallyCheckpointBytes)
		}
		b, err := readParts(ctx, kv, *c.Parts)
		if errors.Is(err, errPartMissing) && try < 3 {
			// A newer head replaced this one and purged its parts, or
			// the replica that answered has not stored them yet.
			if again, gerr := kv.Get(ctx, snats.MetricsCheckpointKey); gerr != nil || again.Revision() == e.Revision() {
				select {
				case <-ctx.Done():
					return 0, log, ctx.Err()
				case <-time.After(time.Duration(try) * 100 * time.Millisecond):
				}
			}
			continue
		}
		if errors.Is(err, errPartMissing) {
			// A replica that has not stored the parts yet may have
			// answered: the stream's leader says whether they are gone.
			if lerr := partsAtLeader(ctx, js, *c.Parts); lerr == nil || !errors.Is(lerr, errPartMissing) {
				return 0, log, fmt.Errorf("%w: %v", projections.ErrTallyCheckpoint, err)
			}
		}
		if errors.Is(err, errPartMissing) || errors.Is(err, projections.ErrTallyCheckpoint) {
			_ = kv.Delete(ctx, snats.MetricsCheckpointKey, jetstream.LastRevision(e.Revision()))
			return 0, log, fmt.Errorf("%w: %v (the head is deleted, for the next save to write one anew)", projections.ErrTallyCheckpoint, err)
		}
		if err != nil {
			return 0, log, err
		}
		if err := t.RestoreCheckpoint(b, log); err != nil {
			return 0, log, err
		}
		return t.Seq(), log, nil
	}
}

// refused says why a tally that forgets finished jobs or not (forget)
// cannot take the checkpoint c is the head of, counting log, as
// RestoreCheckpoint would: before its parts are read.
func (c checkpointHead) refused(log time.Time, forget bool) error {
	switch {
	case c.format() != projections.TallyCheckpointFormat:
		return fmt.Errorf("%w: format %d, not %d", projections.ErrTallyCheckpoint, c.format(), projections.TallyCheckpointFormat)
	case !c.Log.Equal(log):
		return fmt.Errorf("%w: of the log made at %s, not of the one made at %s", projections.ErrTallyCheckpoint, c.Log.Format(time.RFC3339Nano), log.UTC().Format(time.RFC3339Nano))
	case c.Forget != forget:
		return fmt.Errorf("%w: written by a tally that forgets finished jobs: %t", projections.ErrTallyCheckpoint, c.Forget)
	}
	return nil
}

// logEnd returns the last sequence of the log info is of, which it
// reads again when asked of a sequence past it, as it stood then: the
// log moves on meanwhile. A log made again since is an projections.ErrTallyCheckpoint.
func logEnd(ctx context.Context, js jetstream.JetStream, info *jetstream.StreamInfo) func(seq uint64) (uint64, error) {
	last := info.State.LastSeq
	return func(seq uint64) (uint64, error) {
		if seq <= last {
			return last, nil
		}
		fresh, err := logInfo(ctx, js)
		if err != nil {
			return 0, err
		}
		if !fresh.Created.Equal(info.Created) {
			return 0, fmt.Errorf("%w: %s was made again meanwhile", projections.ErrTallyCheckpoint, snats.EventStream)
		}
		last = fresh.State.LastSeq
		return last, nil
	}
}

// SaveTallyCheckpoint writes t's checkpoint, of the log t counts (log, as
// ResumeTally returned it), to the serp_metrics bucket, unless the one there
// is as far along and one t could take (another engine wrote it); it
// reports whether it wrote. It writes nothing if the stream is no longer
// that log (it was made again meanwhile): what t counted is not of the
// log there now. Engines share the one checkpoint: every tally folds the
// same log the same way.
//
// A checkpoint larger than a part is written in parts, its head last.
// The parts no head names any longer are purged from the bucket's stream
// (its user needs to purge KV_serp_metrics): before parts are written,
// those of writes that lost or were cut short (if they cannot be, no
// parts are written, so that they do not pile up); after a head is
// written, those of the head it replaced too, when an error comes with
// written true: the checkpoint stands.
func SaveTallyCheckpoint(ctx context.Context, js jetstream.JetStream, t *projections.Tally, log time.Time) (bool, error) {
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
	b, seq, err := t.Checkpoint(log)
	if err != nil {
		return false, err
	}
	forget, end := t.Forgets(), logEnd(ctx, js, info)
	// farther reports whether the checkpoint there is one a tally could
	// take and as far along as t's. One a tally could not take (ResumeTally
	// would refuse it) is written over whatever its sequence; one past
	// the log's end as this save began is looked at against the log's end
	// now, as another engine may have counted further meanwhile.
	takes := func(there checkpointHead) bool { return there.refused(log, forget) == nil }
	farther := func(there checkpointHead) bool {
		if !takes(there) || there.Seq < seq {
			return false
		}
		last, err := end(there.Seq)
		return err != nil || there.Seq <= last // in doubt, left as it is
	}
	there, entry, err := getHead(ctx, kv)
	if err != nil {
		return false, err
	}
	if there != nil && farther(*there) {
		return false, nil
	}
	head, keep := b, ""
	if size := sizeOfParts(js); len(b) > size {
		// Parts behind a head a tally could not take (of another log,
		// say) may be another engine's, writing them to replace it.
		var at uint64
		var named string
		if there != nil && takes(*there) {
			at = there.Seq
			if there.Parts != nil {
				named = there.Parts.ID
			}
		}
		if err := purgeStale(ctx, js, at, named, end); err != nil {
			return false, fmt.Errorf("metrics: checkpoint not written, as the parts of older ones cannot be purged: %w", err)
		}
		parts, err := writeParts(ctx, kv, b, seq, size)
		if err == nil {
			keep = parts.ID
			head, err = json.Marshal(checkpointHead{PartsFormat: projections.TallyCheckpointFormat, Log: log.UTC(), Seq: seq, Forget: forget, Parts: parts})
		}
		if err != nil {
			dropParts(js, parts)
			return false, err
		}
	}
	written, lost, err := saveHead(ctx, kv, head, farther, there, entry)
	if !written {
		if lost && keep != "" {
			// Not an error whose write may have been stored after all:
			// nothing names these parts.
			dropParts(js, &checkpointParts{ID: keep})
		}
		return false, err
	}
	// The parts of the head replaced, and of any write behind this one.
	if err := purgeStale(ctx, js, seq, keep, end); err != nil {
		return true, err
	}
	return true, nil
}

// dropParts purges the parts of a write whose head was not written, if
// any, as best it can: nothing names them.
func dropParts(js jetstream.JetStream, p *checkpointParts) {
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = purgeID(ctx, js, p.ID)
}

// getHead reads the head under the key tally: nil if there is none, and
// the zero head for a value that is not one.
func getHead(ctx context.Context, kv jetstream.KeyValue) (*checkpointHead, jetstream.KeyValueEntry, error) {
	e, err := kv.Get(ctx, snats.MetricsCheckpointKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("metrics: checkpoint: %w", err)
	}
	var h checkpointHead
	if json.Unmarshal(e.Value(), &h) != nil {
		h = checkpointHead{}
	}
	return &h, e, nil
}

// saveHead writes head under the key tally, unless farther says the one
// there is as far along; there and e are the head as last read (nil for
// none). lost says head is surely not there: another one is; with an
// error and not lost, it may have been written all the same (a reply
// lost, say).
func saveHead(ctx context.Context, kv jetstream.KeyValue, head []byte, farther func(checkpointHead) bool,
	there *checkpointHead, e jetstream.KeyValueEntry) (written, lost bool, err error) {
	for range 3 {
		switch {
		case there == nil:
			_, err = kv.Create(ctx, snats.MetricsCheckpointKey, head)
		case farther(*there):
			return false, true, nil
		default:
			_, err = kv.Update(ctx, snats.MetricsCheckpointKey, head, e.Revision())
		}
		if err == nil {
			return true, false, nil
		}
		if !snats.IsCASConflict(err) {
			return false, false, fmt.Errorf("metrics: checkpoint: %w", err)
		}
		// Written meanwhile by another engine: compare with that one.
		if there, e, err = getHead(ctx, kv); err != nil {
			return false, false, err
		}
	}
	// Each of three engines, say, each further along, wrote one meanwhile.
	if there != nil && farther(*there) {
		return false, true, nil
	}
	return false, true, errors.New("metrics: checkpoint not written: other engines wrote it three times meanwhile")
}

// KeepTallyCheckpoint saves t's checkpoint of log (SaveTallyCheckpoint) every
// interval while t has moved past the last one saved, and once more when
// ctx ends, until then. from is the sequence of the checkpoint t was
// restored from (as ResumeTally returned it; 0 for none): t is saved once it
// is past that, however far t had counted when KeepTallyCheckpoint began. A
// zero log, when ResumeTally could not read the stream, is the stream's as the
// first save finds it. A save that fails is tried at the next tick, and
// logged as a warning when saves begin to fail: the checkpoint only spares
// an engine that starts some reading. A save that leaves the parts of
// older checkpoints in the bucket, as they could not be purged, is logged
// the same way.
func KeepTallyCheckpoint(ctx context.Context, js jetstream.JetStream, t *projections.Tally, log time.Time, from uint64, every time.Duration, logger *slog.Logger) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if every <= 0 {
		every = DefaultTallyCheckpointEvery
	}
	saved, failing, leaving := from, false, false
	save := func(ctx context.Context) {
		// The log the tally counts: the fold starts again from nothing
		// on a log deleted and made again. Read before the tally is, so
		// that a checkpoint never says it is of a log newer than its
		// counts (SaveTallyCheckpoint refuses one of an older log).
		if l := t.Log(); !l.IsZero() && !l.Equal(log) {
			if !log.IsZero() {
				saved = 0
			}
			log = l
		}
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
		written, err := SaveTallyCheckpoint(ctx, js, t, log)
		if written && err != nil {
			level := slog.LevelWarn
			if leaving {
				level = slog.LevelDebug
			}
			logger.Log(ctx, level, "metrics: the checkpoint is saved, but the parts of older ones are left in the bucket", "seq", seq, "err", err)
		}
		if written {
			leaving = err != nil
		}
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
