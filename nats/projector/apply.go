package projector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/serpent-engine/serpent/eventstore"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

// Limits of one apply.
const (
	// writeWindow bounds the writes of one window: an atomic batch holds
	// at most 1,000 messages (the server's default).
	writeWindow = 1000
	// maxRounds bounds how often a batch retries values that changed under
	// it before the batch fails.
	maxRounds = 8
	// readers is how many values are read at once.
	readers = 16
	// lanes is how many windows of one bucket are written at once.
	lanes = 2
	// writeTimeout bounds the wait for one window's acknowledgements.
	writeTimeout = 30 * time.Second
)

// applier folds records into projection buckets. Every value it writes
// carries the stream sequence of the last event applied to it, and every
// write is a compare-and-set on the value's KV revision: a value is read,
// folded (records at or below its sequence are skipped) and written only
// if nobody wrote it meanwhile, else read, folded and written again. So
// an event applied before a crash, delivered twice, or applied by a runner
// that lost its lease while writing, is never counted twice.
type applier struct {
	js    jetstream.JetStream
	proj  projections.Projection
	b     *buckets
	cache *cache
	// fresh is for a rebuild's staging buckets, which start empty and
	// nobody else writes: a value the cache does not hold does not exist.
	fresh bool
	// history reads a job's events up to a stream sequence; nil for none.
	// It refolds a job's values that should exist and do not (an operator
	// deleted them, or their bucket was made again).
	history func(ctx context.Context, jobID string, upTo uint64) ([]projections.Record, error)

	mu        sync.Mutex // guards cache, conflicts and writes while buckets are written at once
	conflicts int        // compare-and-set failures retried
	writes    int        // values written
}

// apply folds recs, in stream order, into every value they change, and
// returns once each changed value is durably written. ok, if given, is
// asked before each window of writes; when it says no (the runner's lease
// is no longer trusted) apply stops with snats.ErrLeaseLost.
func (a *applier) apply(ctx context.Context, recs []projections.Record, ok func() bool) error {
	return a.applyHolding(ctx, recs, nil, ok)
}

// applyHolding is apply, except that the values of the jobs in held
// alone (their status, observation, job ledger and key ledgers) are left
// as they are: the runner folds those jobs' records into them with a
// later batch. Values other jobs share (the day ledgers) take every
// record now.
func (a *applier) applyHolding(ctx context.Context, recs []projections.Record, held map[string]time.Time, ok func() bool) error {
	targets, byTarget := projections.Group(recs)
	if len(held) > 0 {
		targets = withoutHeld(targets, byTarget, held)
	}
	todo, reread := targets, map[projections.Target]bool{}
	unborn := projections.Unborn(targets, byTarget)
	for round := 0; len(todo) > 0; round++ {
		if round == maxRounds {
			return fmt.Errorf("projector: %d values kept changing under the runner (another runner?), e.g. %s", len(todo), todo[0])
		}
		current, err := a.load(ctx, todo, reread, unborn)
		if err != nil {
			return err
		}
		if err := a.refold(ctx, todo, current, unborn, byTarget, recs[len(recs)-1].Seq); err != nil {
			return err
		}
		retry, err := a.writeAll(ctx, todo, current, byTarget, ok)
		if err != nil {
			return err
		}
		a.mu.Lock()
		for _, t := range retry {
			a.cache.drop(t)
			reread[t] = true
		}
		a.conflicts += len(retry)
		a.mu.Unlock()
		todo = retry
	}
	return nil
}

// withoutHeld drops from targets the values that only held jobs change.
func withoutHeld(targets []projections.Target, byTarget map[projections.Target][]projections.Record, held map[string]time.Time) []projections.Target {
	out := targets[:0:0]
	for _, t := range targets {
		if !t.Shared() && !slices.ContainsFunc(byTarget[t], func(r projections.Record) bool {
			_, h := held[r.Event.JobID]
			return !h
		}) {
			delete(byTarget, t)
			continue
		}
		out = append(out, t)
	}
	return out
}

// refold gives a value of a job (its status, job ledger or key ledger)
// that has no value although the batch does not begin it (so an earlier
// batch wrote it, and something deleted it since) the job's whole history
// up to upTo to fold, instead of the batch's events alone: a value folded
// from the rest of a history would claim the newest sequence and never be
// mended. The history must reach the batch's last event of the value:
// direct gets may be answered by a replica behind the leader, and a
// history read short would leave the batch's own events out of the value
// while the batch is acknowledged. Such a read fails the batch, which
// comes again.
func (a *applier) refold(ctx context.Context, todo []projections.Target, current map[projections.Target]entry,
	unborn map[projections.Target]bool, byTarget map[projections.Target][]projections.Record, upTo uint64) error {
	if a.history == nil {
		return nil
	}
	hists := map[string][]projections.Record{} // each job's history, read once
	for _, t := range todo {
		if !refoldable(t) || current[t].value != nil || unborn[t] {
			continue
		}
		var mine []projections.Record
		for _, job := range jobsOf(byTarget[t]) {
			hist, ok := hists[job]
			if !ok {
				var err error
				if hist, err = a.history(ctx, job, upTo); err != nil {
					return fmt.Errorf("projector: %s has no value: read the history of job %s: %w", t, job, err)
				}
				hists[job] = hist
			}
			var got []projections.Record
			for _, r := range hist {
				if slices.Contains(projections.Targets(r.Event), t) {
					got = append(got, r)
				}
			}
			if err := reachesBatch(t, job, got, byTarget[t]); err != nil {
				return err
			}
			mine = append(mine, got...)
		}
		slices.SortFunc(mine, func(x, y projections.Record) int {
			return cmp.Or(cmp.Compare(x.Seq, y.Seq), cmp.Compare(x.Event.Version, y.Event.Version))
		})
		byTarget[t] = mine
	}
	return nil
}

// refoldable reports whether a missing value is folded from its job's
// history: the status, job ledger and key ledgers, which one job's events
// make. Not a day ledger, which many jobs share (serpent projections
// rebuild mends it), nor an observation, which each ObservationStored
// writes whole: the batch's alone write it right.
func refoldable(t projections.Target) bool {
	switch t.Bucket {
	case projections.StatusBucket:
		return true
	case projections.LedgerBucket:
		return strings.HasPrefix(t.Key, projections.LedgerJobPrefix) || strings.HasPrefix(t.Key, projections.LedgerKeyPrefix)
	}
	return false
}

// jobsOf lists the jobs of a value's records, once each: its job (a key
// belongs to the job that made it; only a doctored log names it in
// another's events).
func jobsOf(recs []projections.Record) []string {
	var out []string
	for _, r := range recs {
		if !slices.Contains(out, r.Event.JobID) {
			out = append(out, r.Event.JobID)
		}
	}
	return out
}

// reachesBatch checks that the history of job read for t holds the
// batch's last event of t from that job (a history is read from the first
// event on, so it then holds every one before it too).
func reachesBatch(t projections.Target, job string, hist, batch []projections.Record) error {
	var reached, through uint64
	if len(hist) > 0 {
		reached = hist[len(hist)-1].Seq
	}
	for _, r := range batch {
		if r.Event.JobID == job {
			through = r.Seq
		}
	}
	if reached < through {
		return fmt.Errorf("projector: read the history of job %s: it ended at sequence %d, before %d (a replica behind the leader answered?); %s has no value and is not written from part of it",
			job, reached, through, t)
	}
	return nil
}

// writeAll writes the buckets at once, each in windows, lanes windows of
// a bucket at a time: one is folded and encoded while the server stores
// another. It returns the values whose compare-and-set failed.
func (a *applier) writeAll(ctx context.Context, todo []projections.Target, current map[projections.Target]entry,
	byTarget map[projections.Target][]projections.Record, ok func() bool) ([]projections.Target, error) {
	perBucket := map[string][]projections.Target{}
	for _, t := range todo {
		perBucket[t.Bucket] = append(perBucket[t.Bucket], t)
	}
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		conflicted []projections.Target
		errs       []error
	)
	for _, targets := range perBucket {
		next, failed := 0, false // the bucket's next window, and whether one failed
		for range lanes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					start := next
					next += writeWindow
					stop := failed || start >= len(targets)
					mu.Unlock()
					if stop {
						return
					}
					if ok != nil && !ok() {
						mu.Lock()
						errs, failed = append(errs, snats.ErrLeaseLost), true
						mu.Unlock()
						return
					}
					c, err := a.write(ctx, targets[start:min(start+writeWindow, len(targets))], current, byTarget)
					mu.Lock()
					conflicted = append(conflicted, c...)
					if err != nil {
						errs, failed = append(errs, err), true
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if slices.ContainsFunc(errs, func(err error) bool { return errors.Is(err, snats.ErrLeaseLost) }) {
		return nil, snats.ErrLeaseLost
	}
	return conflicted, errors.Join(errs...)
}

// write folds and writes one window of values of one bucket; it returns the values whose
// compare-and-set failed. The values of one bucket go in one atomic batch
// (one disk sync for the lot, which is what makes a runner fast on a
// server that syncs every write), each message with its own expected
// revision; a batch the server refuses, for a conflict or anything else,
// is written again value by value, which tells which values conflicted.
// Up to pipelineMax values are written value by value at once, all in
// flight together: on a single server an atomic batch is staged in a file
// store of its own first, which costs more than many plain writes (every
// value is its own compare-and-set either way).
func (a *applier) write(ctx context.Context, window []projections.Target, current map[projections.Target]entry,
	byTarget map[projections.Target][]projections.Record) ([]projections.Target, error) {
	byBucket := map[string][]pendingValue{}
	var buckets []string
	for _, t := range window {
		cur := current[t]
		next, changed, err := a.proj.Fold(t, cur.value, byTarget[t])
		if err != nil {
			return nil, err
		}
		if !changed {
			continue
		}
		if _, ok := byBucket[t.Bucket]; !ok {
			buckets = append(buckets, t.Bucket)
		}
		byBucket[t.Bucket] = append(byBucket[t.Bucket], pendingValue{t: t, rev: cur.rev, value: next, expires: expiresOf(t, byTarget[t])})
	}
	wait, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	var conflicted []projections.Target
	var errs []error
	for _, b := range buckets {
		vs := byBucket[b]
		if len(vs) > pipelineMax && a.writeBatch(wait, vs) {
			continue
		}
		c, err := a.writeEach(wait, vs)
		conflicted = append(conflicted, c...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return conflicted, errors.Join(errs...)
}

// pipelineMax is the most values of one bucket written one by one rather
// than as an atomic batch. A lightly loaded engine writes some ten to
// twenty values a batch, most of them to serp_ledger; as atomic batches,
// their staging took a fifth of the CPU of serpent bench's steady phase,
// and writing them one by one took 13 % off its CPU a job.
const pipelineMax = 64

type pendingValue struct {
	t       projections.Target
	rev     uint64
	value   []byte
	expires time.Time // when the value leaves with its job; zero: never
}

// expiresOf is when a value leaves its bucket: a value of one job leaves
// with the job (projections.Record.Expires); a day's ledger stays.
func expiresOf(t projections.Target, recs []projections.Record) time.Time {
	if t.Shared() || len(recs) == 0 {
		return time.Time{}
	}
	return recs[len(recs)-1].Expires
}

// valueMsg is the message that writes value under key in bucket (the
// bucket's own name, staging or live), with a compare-and-set on the
// key's revision rev: every write of a projection value is one. A value
// of a job carries a TTL (eventstore.HeaderTTL) that makes the server
// drop it when its job leaves the live log; a zero expires keeps it.
func valueMsg(bucket, key string, value []byte, rev uint64, expires time.Time) *natsgo.Msg {
	m := natsgo.NewMsg("$KV." + bucket + "." + key)
	m.Data = value
	m.Header.Set(natsgo.ExpectedLastSubjSeqHdr, strconv.FormatUint(rev, 10))
	if !expires.IsZero() {
		m.Header.Set(eventstore.HeaderTTL, strconv.FormatInt(int64(eventstore.TTL(expires, time.Now())/time.Second), 10)+"s")
	}
	return m
}

// valueMsg is the message that writes v.
func (a *applier) valueMsg(v pendingValue) *natsgo.Msg {
	return valueMsg(a.b.name[v.t.Bucket], v.t.Key, v.value, v.rev, v.expires)
}

// writeBatch writes values as one atomic batch and reports whether it
// was written.
func (a *applier) writeBatch(ctx context.Context, vs []pendingValue) bool {
	msgs := make([]*natsgo.Msg, len(vs))
	for i, v := range vs {
		msgs[i] = a.valueMsg(v)
	}
	ack, err := jetstreamext.PublishMsgBatch(ctx, a.js, msgs)
	if err != nil || ack.BatchSize != uint64(len(vs)) {
		return false
	}
	first := ack.Sequence - uint64(len(vs)) + 1 // a batch is stored at consecutive sequences
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, v := range vs {
		a.cache.put(v.t, entry{rev: first + uint64(i), value: v.value})
	}
	a.writes += len(vs)
	return true
}

// eachChunk bounds the values writeEach has in flight: with every lane
// of every bucket at it, the client stays below its 4,000 async
// publishes.
const eachChunk = 500

// writeEach writes values one by one (pipelined, eachChunk at a time)
// and returns those whose compare-and-set failed.
func (a *applier) writeEach(ctx context.Context, vs []pendingValue) ([]projections.Target, error) {
	var conflicted []projections.Target
	var errs []error
	for len(vs) > 0 {
		chunk := vs[:min(len(vs), eachChunk)]
		vs = vs[len(chunk):]
		futs := make([]jetstream.PubAckFuture, len(chunk))
		for i, v := range chunk {
			fut, err := a.js.PublishMsgAsync(a.valueMsg(v))
			if err != nil {
				return nil, fmt.Errorf("projector: write %s: %w", v.t, err)
			}
			futs[i] = fut
		}
		for i, v := range chunk {
			select {
			case ack := <-futs[i].Ok():
				a.mu.Lock()
				a.cache.put(v.t, entry{rev: ack.Sequence, value: v.value})
				a.writes++
				a.mu.Unlock()
			case err := <-futs[i].Err():
				if snats.IsCASConflict(err) {
					conflicted = append(conflicted, v.t)
				} else {
					errs = append(errs, fmt.Errorf("projector: write %s: %w", v.t, err))
				}
			case <-ctx.Done():
				return nil, fmt.Errorf("projector: writing %d values: %w", len(chunk), ctx.Err())
			}
		}
	}
	return conflicted, errors.Join(errs...)
}

// load returns the current value of each target: from the cache, or read
// from its bucket (reread forces a read). A target in unborn that the
// cache does not hold is taken to have no value, unread: its
// compare-and-set tells if it has one after all.
func (a *applier) load(ctx context.Context, targets []projections.Target, reread, unborn map[projections.Target]bool) (map[projections.Target]entry, error) {
	out := make(map[projections.Target]entry, len(targets))
	var missing []projections.Target
	for _, t := range targets {
		if e, ok := a.cache.get(t); ok && !reread[t] {
			out[t] = e
			continue
		}
		if (a.fresh || unborn[t]) && !reread[t] {
			out[t] = entry{}
			continue
		}
		missing = append(missing, t)
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		errs []error
		sem  = make(chan struct{}, readers)
	)
	for _, t := range missing {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			e, err := readValue(ctx, a.b.stream[t.Bucket], a.b.name[t.Bucket], t.Key)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("projector: read %s: %w", t, err))
				return
			}
			out[t] = e
			a.mu.Lock()
			a.cache.put(t, e)
			a.mu.Unlock()
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// readValue reads a key's latest value and revision from the bucket's
// stream (a KV Get hides a delete marker's revision, which the next
// compare-and-set needs). A missing key is the zero entry; a deleted one
// has its marker's revision and no value.
func readValue(ctx context.Context, stream jetstream.Stream, bucket, key string) (entry, error) {
	m, err := stream.GetLastMsgForSubject(ctx, "$KV."+bucket+"."+key)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return entry{}, nil
	case err != nil:
		return entry{}, err
	}
	if deleteMarker(m.Header) {
		return entry{rev: m.Sequence}, nil
	}
	return entry{rev: m.Sequence, value: m.Data}, nil
}
