package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	snats "github.com/serpent-engine/serpent/nats"
)

// SweepRecord is the value under the metrics bucket's key
// snats.MetricsSweepKey: when a sweep began, and which engine began it.
type SweepRecord struct {
	Began  time.Time `json:"began"`
	Worker string    `json:"worker"`
}

// SweepTurn says whether a periodic sweep for lost timers is this
// engine's (worker's) to make at now: whether it made the last one, as
// kv's snats.MetricsSweepKey records, or no engine has begun one in the
// last nine tenths of every (a record more than every ahead of now, by an
// engine whose clock is far off, counts as none). A sweep looks at every job in
// flight, whichever engine makes it, so engines that sweep every interval
// need one sweep an interval between them, not one each: at a million
// jobs in flight a sweep costs the server some ten seconds of reading its
// index of timers. If the turn is this engine's, SweepTurn records the
// sweep as begun by it with a compare-and-set, so that of engines asking
// at once one sweeps; last is the record it found. On an error (the
// bucket cannot be read or written) the caller should sweep all the same:
// a sweep made twice costs less than a lost timer left.
func SweepTurn(ctx context.Context, kv jetstream.KeyValue, worker string, now time.Time, every time.Duration) (mine bool, last SweepRecord, err error) {
	rec, err := json.Marshal(SweepRecord{Began: now.UTC(), Worker: worker})
	if err != nil {
		return false, last, err
	}
	for tries := 1; ; tries++ {
		last = SweepRecord{}
		e, err := kv.Get(ctx, snats.MetricsSweepKey)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = kv.Create(ctx, snats.MetricsSweepKey, rec)
		case err != nil:
			return false, last, fmt.Errorf("sweep turn: %w", err)
		default:
			// A record that cannot be read is taken as no sweep: the
			// turn is this engine's, and its record replaces it.
			if json.Unmarshal(e.Value(), &last) == nil && last.Worker != worker {
				if ago := now.Sub(last.Began); ago > -every && ago < every*9/10 {
					return false, last, nil
				}
			}
			_, err = kv.Update(ctx, snats.MetricsSweepKey, rec, e.Revision())
		}
		switch {
		case err == nil:
			return true, last, nil
		case !snats.IsCASConflict(err):
			return false, last, fmt.Errorf("sweep turn: %w", err)
		case tries == 3:
			// Written over three times while deciding: others are
			// taking the turn.
			return false, last, nil
		}
		// Another write came between the read and this one (or, on a
		// replicated bucket, was in flight): decide again on what it left.
	}
}

// LeaveSweepTurn gives up the turn worker holds, if it still does: its
// sweep failed, so another engine should not wait out an interval before
// making the next. The record is deleted with a compare-and-set, leaving
// one another engine wrote since.
func LeaveSweepTurn(ctx context.Context, kv jetstream.KeyValue, worker string) error {
	e, err := kv.Get(ctx, snats.MetricsSweepKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweep turn: %w", err)
	}
	var last SweepRecord
	if json.Unmarshal(e.Value(), &last) != nil || last.Worker != worker {
		return nil
	}
	if err := kv.Delete(ctx, snats.MetricsSweepKey, jetstream.LastRevision(e.Revision())); err != nil && !snats.IsCASConflict(err) {
		return fmt.Errorf("sweep turn: %w", err)
	}
	return nil
}
