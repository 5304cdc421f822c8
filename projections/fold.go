package projections

import (
	"time"

	"encoding/json"
	"fmt"
	"strings"

	"github.com/serpent-engine/serpent/events"
)

// Record is an event at its place in the log: Seq is the stream sequence
// of the message that holds it in SERP_EVENTS, which the other events of
// a group written as one message share (log order is Seq, then the
// event's Version).
type Record struct {
	Seq   uint64
	Event events.Event
	// Expires is when the event's job leaves the live log, read from its
	// message (eventstore.ExpiryOf); zero when it stays. A view of one
	// job leaves with it.
	Expires time.Time
}

// DefaultPriceMicrosPerPage is the price of one page with results that
// the day ledger's spend estimate uses unless told otherwise: the
// sandbox's price, 1000 micro-dollars.
const DefaultPriceMicrosPerPage = 1000

// Config tunes the projections.
type Config struct {
	// PriceMicrosPerPage prices a page with results for the day ledger's
	// spend estimate; 0 means DefaultPriceMicrosPerPage.
	PriceMicrosPerPage int64
}

// Projection computes the values of the projection buckets from the log.
// It holds no state: the state is the values themselves, each of which
// remembers the stream sequence of the last event applied to it (seq), so
// applying an event twice changes nothing.
type Projection struct {
	price int64
}

// New returns the projection for cfg.
func New(cfg Config) Projection {
	if cfg.PriceMicrosPerPage <= 0 {
		cfg.PriceMicrosPerPage = DefaultPriceMicrosPerPage
	}
	return Projection{price: cfg.PriceMicrosPerPage}
}

// value is one projection value as a reducer sees it.
type value interface {
	// lastSeq is the stream sequence of the last event applied.
	lastSeq() uint64
	// apply adds one event (with a higher sequence) and records its seq.
	apply(r Record)
}

// newValue returns the empty value a target holds before its first event.
func (p Projection) newValue(t Target) (value, error) {
	switch {
	case t.Bucket == StatusBucket:
		return &StatusValue{}, nil
	case t.Bucket == ObservationsBucket:
		return &Observation{}, nil
	case t.Bucket == LedgerBucket && strings.HasPrefix(t.Key, LedgerKeyPrefix):
		return &KeyLedger{Key: strings.TrimPrefix(t.Key, LedgerKeyPrefix)}, nil
	case t.Bucket == LedgerBucket && strings.HasPrefix(t.Key, LedgerJobPrefix):
		return &JobLedger{}, nil
	case t.Bucket == LedgerBucket && strings.HasPrefix(t.Key, LedgerDayPrefix):
		return &DayLedger{Day: strings.TrimPrefix(t.Key, LedgerDayPrefix)}, nil
	}
	return nil, fmt.Errorf("projections: %s is not a projection value", t)
}

// Fold applies records, in log order, to the encoded value of a target
// (nil or empty when the target has no value yet) and returns the new
// encoded value. recs are records that change the target (Group sorts a
// batch so). Records at or below the value's seq were applied before and
// are skipped; changed is false when nothing was applied. It fails only on
// a stored value it cannot read or a target that is not a projection
// value.
func (p Projection) Fold(t Target, current []byte, recs []Record) (next []byte, changed bool, err error) {
	v, err := p.newValue(t)
	if err != nil {
		return nil, false, err
	}
	if len(current) > 0 {
		if err := json.Unmarshal(current, v); err != nil {
			return nil, false, fmt.Errorf("projections: value of %s is unreadable: %w", t, err)
		}
	}
	// A value's seq is that of the last message applied to it, whole:
	// the events of a group share their message's sequence and come in
	// one batch, so they are skipped or applied together.
	past := v.lastSeq()
	for _, r := range recs {
		if r.Seq <= past {
			continue
		}
		v.apply(r)
		changed = true
	}
	if !changed {
		return current, false, nil
	}
	if d, ok := v.(*DayLedger); ok {
		d.estimate(p.price)
	}
	next, err = encodeValue(v)
	if err != nil {
		return nil, false, fmt.Errorf("projections: encode %s: %w", t, err)
	}
	return next, true, nil
}

// Group sorts a batch of records by the values they change, keeping log
// order within each value: the unit a runner reads, folds and writes once.
// Targets come out in the order they are first met.
func Group(recs []Record) (targets []Target, byTarget map[Target][]Record) {
	byTarget = make(map[Target][]Record)
	for _, r := range recs {
		for _, t := range Targets(r.Event) {
			if _, ok := byTarget[t]; !ok {
				targets = append(targets, t)
			}
			byTarget[t] = append(byTarget[t], r)
		}
	}
	return targets, byTarget
}

// Unborn reports the targets of a grouped batch whose values cannot exist
// before it, unless the batch was applied before: the values of a job
// (its status, observation, job ledger and key ledgers) when the batch
// holds the job's JobScheduled, which comes before every other event of
// the job; and a job ledger or key ledger whose first event in the batch
// is the one its value begins with (the job's AttemptCreated, which makes
// the job's first key; a KeyRotated for the key it makes). A runner may
// write them without reading them first, with a compare-and-set on "no
// value yet" that fails only for a batch applied again (or a value
// deleted since), and then reads them. Day ledgers, which many jobs
// share, are never in it.
func Unborn(targets []Target, byTarget map[Target][]Record) map[Target]bool {
	born := map[string]bool{}
	for _, t := range targets {
		if t.Bucket != StatusBucket {
			continue
		}
		for _, r := range byTarget[t] {
			if _, ok := r.Event.Data.(events.JobScheduled); ok {
				born[r.Event.JobID] = true
				break
			}
		}
	}
	out := make(map[Target]bool, len(born)*4)
	for _, t := range targets {
		recs := byTarget[t]
		if len(recs) == 0 || t.Shared() {
			continue
		}
		if born[recs[0].Event.JobID] || begins(t, recs[0].Event) {
			out[t] = true
		}
	}
	return out
}

// begins reports whether e is the first event of t's value: the
// AttemptCreated of the job's first key begins the job ledger and that
// key's ledger, a KeyRotated the ledger of the key it makes.
func begins(t Target, e events.Event) bool {
	switch d := e.Data.(type) {
	case events.AttemptCreated:
		return t == JobTarget(e.JobID) || t == KeyTarget(d.Key)
	case events.KeyRotated:
		return t == KeyTarget(d.NewKey)
	}
	return false
}

// Build folds a whole log, in memory, into the value of every target: what
// the buckets hold once a runner has applied recs from sequence 1. Rebuild
// tests and the audit compare the buckets with it.
func (p Projection) Build(recs []Record) (map[Target][]byte, error) {
	targets, byTarget := Group(recs)
	out := make(map[Target][]byte, len(targets))
	for _, t := range targets {
		v, _, err := p.Fold(t, nil, byTarget[t])
		if err != nil {
			return nil, err
		}
		out[t] = v
	}
	return out, nil
}
