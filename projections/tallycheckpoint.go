package projections

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
)

// TallyCheckpointFormat names what a tally's checkpoint holds and how the
// tally that wrote it folded the log. Raise it with any change to the
// tally's fields or to what an event adds to them: a tally restores only
// a checkpoint of its own format, and folds the log from its start
// otherwise (TestTallyCheckpointFormatPinned fails when the fields change).
const TallyCheckpointFormat = 2

// MaxTallyCheckpointBytes bounds a checkpoint: one that would be larger (more
// than some 11 million jobs in flight, at 23 bytes each, or a tally that
// does not forget finished jobs) is not made, and the tally's next reader
// folds the log from an older one.
const MaxTallyCheckpointBytes = 256 << 20

// checkpointLimit is MaxTallyCheckpointBytes, lower in tests.
var checkpointLimit = MaxTallyCheckpointBytes

// ErrTallyCheckpoint says a checkpoint cannot be restored: of another format,
// of another log, or of a tally set otherwise.
var ErrTallyCheckpoint = errors.New("projections: checkpoint not usable")

// checkpoint is a tally written out: enough to go on folding the log from
// the event after Seq and Ver as if it had folded everything before.
type checkpoint struct {
	Format int `json:"format"`
	// Log tells the log it is of apart from another made under the same
	// name: its stream's creation time.
	Log    time.Time   `json:"log"`
	Seq    uint64      `json:"seq"`
	Ver    uint64      `json:"ver"`
	Forget bool        `json:"forget"`
	Counts TallyCounts `json:"counts"`
	// Packed holds the jobs kept in a byte: 17 bytes each, the 16 of the
	// job's id and its packedJob.
	Packed      []byte                     `json:"packed,omitempty"`
	Wide        map[string]checkpointJob   `json:"wide,omitempty"`
	Recent      []string                   `json:"recent,omitempty"`
	Doubled     []string                   `json:"doubled,omitempty"`
	Reconciling map[string]checkpointQueue `json:"reconciling,omitempty"`
}

type checkpointJob struct {
	Status      aggregate.Status `json:"status"`
	Purchases   int              `json:"purchases"`
	Repurchases int              `json:"repurchases"`
	APIDoubles  int              `json:"api_doubles,omitempty"`
	Checking    bool             `json:"checking,omitempty"`
}

type checkpointQueue struct {
	Reason string    `json:"reason"`
	Since  time.Time `json:"since"`
}

// Checkpoint writes t out, for RestoreCheckpoint to go on from where t
// stands, and returns the stream sequence it is at. log is the creation
// time of the stream t folds, so that a checkpoint is never taken for a
// log made again under the same name. It fails with more than
// MaxTallyCheckpointBytes to write.
//
// The checkpoint is JSON whose fields format, log, seq and forget say
// what it is without the jobs it holds, for the store that keeps it.
func (t *Tally) Checkpoint(log time.Time) ([]byte, uint64, error) {
	t.mu.Lock()
	c := checkpoint{Format: TallyCheckpointFormat, Log: log.UTC(), Seq: t.seq, Ver: t.ver, Forget: t.forget,
		Counts: t.c, Recent: slices.Clone(t.recent), Doubled: slices.Clone(t.doubled)}
	c.Counts.Seq, c.Counts.CaughtUp = 0, false
	if n := base64.StdEncoding.EncodedLen(17 * len(t.jobs)); n > checkpointLimit {
		t.mu.Unlock()
		return nil, 0, fmt.Errorf("projections: checkpoint of %d jobs in memory: over %d bytes", len(t.jobs), checkpointLimit)
	}
	// The jobs go straight into their base64, the bulk of the checkpoint
	// (23 bytes a job: 23 MB for a million jobs in flight), which is
	// spliced into the JSON of the rest below: encoding/json would hold
	// them packed, then grow a buffer for their base64, then copy it.
	packed := bytes.NewBuffer(make([]byte, 0, base64.StdEncoding.EncodedLen(17*len(t.jobs))+len(`"}`)))
	enc := base64.NewEncoder(base64.StdEncoding, packed)
	var chunk [17 * 3 * 256]byte // whole groups of base64, a few KB
	n := 0
	for id, p := range t.jobs {
		if n == len(chunk) {
			_, _ = enc.Write(chunk[:]) // a bytes.Buffer takes any write
			n = 0
		}
		n += copy(chunk[n:], id[:])
		chunk[n] = byte(p)
		n++
	}
	_, _ = enc.Write(chunk[:n])
	_ = enc.Close()
	if len(t.wide) > 0 {
		c.Wide = make(map[string]checkpointJob, len(t.wide))
		for id, j := range t.wide {
			c.Wide[id] = checkpointJob{Status: j.status, Purchases: j.purchases, Repurchases: j.repurchases,
				APIDoubles: j.apiDoubles, Checking: j.checking}
		}
	}
	if len(t.reconciling) > 0 {
		c.Reconciling = make(map[string]checkpointQueue, len(t.reconciling))
		for id, w := range t.reconciling {
			c.Reconciling[id] = checkpointQueue{Reason: w.reason, Since: w.since}
		}
	}
	// The maps of t.c are t's: copied, the checkpoint is written out of
	// the lock, which the fold takes for every event.
	c.Counts.Jobs = maps.Clone(c.Counts.Jobs)
	for _, m := range []*map[string]uint64{&c.Counts.Events, &c.Counts.Sends, &c.Counts.Rotations, &c.Counts.Reconciliations, &c.Counts.Checks} {
		*m = maps.Clone(*m)
	}
	t.mu.Unlock()
	head, err := json.Marshal(c) // Packed is nil, and left out
	if err != nil {
		return nil, 0, fmt.Errorf("projections: checkpoint: %w", err)
	}
	b := head
	if packed.Len() > 0 {
		const field = `,"packed":"`
		b = make([]byte, 0, len(head)-1+len(field)+packed.Len()+len(`"}`))
		b = append(append(append(b, head[:len(head)-1]...), field...), packed.Bytes()...)
		b = append(b, `"}`...)
	}
	if len(b) > checkpointLimit {
		return nil, 0, fmt.Errorf("projections: checkpoint of %d bytes: over %d", len(b), checkpointLimit)
	}
	return b, c.Seq, nil
}

// Forgets reports whether t lets finished jobs go (ForgetFinished).
func (t *Tally) Forgets() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.forget
}

// RestoreCheckpoint makes t, a tally that has applied nothing yet, what
// the tally that wrote b was, so that it goes on from the event after
// b's. It refuses (ErrTallyCheckpoint) a checkpoint of another format, of
// another log (its creation time, as given to Checkpoint), or of a tally
// that forgot finished jobs when t does not, or the other way round; t is
// then left as it was.
func (t *Tally) RestoreCheckpoint(b []byte, log time.Time) error {
	var c checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return fmt.Errorf("%w: %v", ErrTallyCheckpoint, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case c.Format != TallyCheckpointFormat:
		return fmt.Errorf("%w: format %d, not %d", ErrTallyCheckpoint, c.Format, TallyCheckpointFormat)
	case !c.Log.Equal(log):
		return fmt.Errorf("%w: of the log made at %s, not of the one made at %s", ErrTallyCheckpoint, c.Log.Format(time.RFC3339Nano), log.UTC().Format(time.RFC3339Nano))
	case c.Forget != t.forget:
		return fmt.Errorf("%w: written by a tally that forgets finished jobs: %t", ErrTallyCheckpoint, c.Forget)
	case len(c.Packed)%17 != 0:
		return fmt.Errorf("%w: %d bytes of packed jobs", ErrTallyCheckpoint, len(c.Packed))
	case t.seq != 0:
		return fmt.Errorf("%w: the tally has applied events already", ErrTallyCheckpoint)
	case !t.log.IsZero() && !t.log.Equal(log):
		return fmt.Errorf("%w: the tally counts the log made at %s", ErrTallyCheckpoint, t.log.UTC().Format(time.RFC3339Nano))
	}
	jobs := make(map[hexID]packedJob, len(c.Packed)/17)
	for i := 0; i < len(c.Packed); i += 17 {
		p := packedJob(c.Packed[i+16])
		if int(p&0xf) > packedChecking {
			return fmt.Errorf("%w: a packed job of status %d", ErrTallyCheckpoint, p&0xf)
		}
		jobs[hexID(c.Packed[i:i+16])] = p
	}
	wide := make(map[string]jobTally, len(c.Wide))
	for id, j := range c.Wide {
		wide[id] = jobTally{status: j.Status, purchases: j.Purchases, repurchases: j.Repurchases,
			apiDoubles: j.APIDoubles, checking: j.Checking}
	}
	var queue map[string]waiting
	if len(c.Reconciling) > 0 {
		queue = make(map[string]waiting, len(c.Reconciling))
		for id, w := range c.Reconciling {
			queue[id] = waiting{reason: w.Reason, since: w.Since}
		}
	}
	counts := c.Counts // the maps are the checkpoint's own, fresh from JSON
	if counts.Jobs == nil {
		counts.Jobs = map[aggregate.Status]int{}
	}
	for _, m := range []*map[string]uint64{&counts.Events, &counts.Sends, &counts.Rotations, &counts.Reconciliations, &counts.Checks} {
		if *m == nil { // null in the JSON
			*m = map[string]uint64{}
		}
	}

	t.jobs, t.wide, t.reconciling, t.recent, t.doubled, t.c = jobs, wide, queue, c.Recent, c.Doubled, counts
	t.seq, t.ver, t.log = c.Seq, c.Ver, log
	t.caughtUp = t.end > 0 && t.seq >= t.end
	return nil
}
