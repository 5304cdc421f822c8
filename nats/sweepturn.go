package nats

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SweepRecord is the value under the key MetricsSweepKey of the metrics
// bucket: when a sweep began, and which engine began it.
type SweepRecord struct {
	Began  time.Time `json:"began"`
	Worker string    `json:"worker"`
}

// SweepTurn is an engine's place in the turns the engines take at the
// periodic sweep for lost timers. A sweep looks at every job in flight,
// whichever engine makes it, so engines that sweep every interval need
// one sweep an interval between them, not one each: at a million jobs in
// flight a sweep costs the server some ten seconds of reading its index
// of timers.
//
// The turn is a Lease on MetricsSweepKey whose claim is the SweepRecord,
// stamped by the engines' shared clock (the server's): an engine keeps
// the turn while it makes the sweeps, and another takes it when no engine
// has begun one for nine tenths of its own interval. A record more than
// an interval ahead of an engine's clock, by an engine whose clock is far
// off, counts as none; so does one that cannot be read.
type SweepTurn struct {
	lease *Lease
}

// NewSweepTurn returns worker's turn at sweeps every every (above 0), in
// kv (the metrics bucket), by the clock now.
func NewSweepTurn(kv jetstream.KeyValue, worker string, every time.Duration, now func() time.Time) *SweepTurn {
	return &SweepTurn{lease: NewLease(kv, MetricsSweepKey, LeaseConfig{Holder: worker, TTL: every * 9 / 10, Ahead: every,
		Now: now, Format: sweepRecordFormat})}
}

// Take says whether the periodic sweep due now is this engine's to make:
// whether it made the last one, or no engine has begun one lately. If it
// is, Take records the sweep as begun by this engine with a
// compare-and-set, so that of engines asking at once one sweeps. last is
// the record it found. On an error (the bucket cannot be read or written)
// the caller should sweep all the same: a sweep made twice costs less
// than a lost timer left.
func (s *SweepTurn) Take(ctx context.Context) (mine bool, last SweepRecord, err error) {
	mine, found, err := s.lease.Take(ctx)
	return mine, SweepRecord{Began: found.Stamp, Worker: found.Holder}, err
}

// Leave gives up the turn this engine took, if it still holds it: its
// sweep failed, so another engine should not wait out an interval before
// making the next. A record another engine wrote since is left.
func (s *SweepTurn) Leave(ctx context.Context) error {
	return s.lease.Release(ctx)
}

// sweepRecordFormat writes a sweep turn's claim as a SweepRecord.
var sweepRecordFormat = LeaseFormat{
	Encode: func(c LeaseClaim) []byte {
		b, _ := json.Marshal(SweepRecord{Began: c.Stamp.UTC(), Worker: c.Holder})
		return b
	},
	Decode: func(b []byte) (LeaseClaim, bool) {
		var r SweepRecord
		if json.Unmarshal(b, &r) != nil {
			return LeaseClaim{}, false
		}
		return LeaseClaim{Holder: r.Worker, Stamp: r.Began}, true
	},
}
