package projections

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
)

// TestTallyCheckpointGoesOn feeds random logs to a tally that never stops and
// to one that is written out and restored into a new tally every few
// records, as an engine that restarts from its last checkpoint, and
// requires the two to agree after every record: totals, queue, recent
// jobs and what they keep in memory.
func TestTallyCheckpointGoesOn(t *testing.T) {
	log := time.Date(2026, 12, 5, 10, 0, 0, 123, time.UTC)
	for seed := range seeds(20) {
		for _, forget := range []bool{true, false} {
			t.Run(fmt.Sprintf("%d/forget=%t", seed, forget), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 11))
				ids := randomJobIDs(rng)
				fresh := func() *Tally {
					if forget {
						return NewTally().ForgetFinished()
					}
					return NewTally()
				}
				steady, restarted := fresh(), fresh()
				history := map[string][]events.Event{}
				seq, restarts := uint64(0), 0
				feed := func(r Record) {
					for _, tl := range []*Tally{steady, restarted} {
						if !tl.Apply(r) {
							tl.ApplyWithHistory(r, history[r.Event.JobID])
						}
					}
				}
				for step := range 1200 {
					switch n := rng.IntN(100); {
					case n < 3:
						seq++
						steady.Undecodable(seq)
						restarted.Undecodable(seq)
					case n < 6 && seq > 0: // a record seen before
						feed(Record{Seq: 1 + rng.Uint64N(seq), Event: randomEvent(rng, ids)})
					default:
						seq++
						e := randomEvent(rng, ids)
						e.Version = uint64(len(history[e.JobID])) + 1
						feed(Record{Seq: seq, Event: e})
						history[e.JobID] = append(history[e.JobID], e)
					}
					if rng.IntN(40) == 0 {
						b, _, err := restarted.Checkpoint(log)
						require.NoError(t, err)
						restarted = fresh()
						require.NoError(t, restarted.RestoreCheckpoint(b, log))
						restarts++
					}
					require.Equal(t, steady.Counts(), restarted.Counts(), "step %d", step)
					require.Equal(t, steady.Recent(), restarted.Recent(), "step %d", step)
					wantQ, wantN := steady.Reconciling(100)
					gotQ, gotN := restarted.Reconciling(100)
					require.Equal(t, wantN, gotN, "step %d", step)
					require.Equal(t, len(wantQ), len(gotQ), "step %d", step)
					for i := range wantQ {
						require.Equal(t, wantQ[i].JobID, gotQ[i].JobID)
						require.Equal(t, wantQ[i].Reason, gotQ[i].Reason)
						require.True(t, wantQ[i].Since.Equal(gotQ[i].Since))
					}
					require.Equal(t, steady.jobs, restarted.jobs, "step %d", step)
					require.Equal(t, len(steady.wide), len(restarted.wide), "step %d", step)
					for id, j := range steady.wide {
						require.Equal(t, j, restarted.wide[id], "step %d: job %q", step, id)
					}
					require.Equal(t, steady.seq, restarted.seq)
					require.Equal(t, steady.ver, restarted.ver)
				}
				require.Greater(t, restarts, 10)
			})
		}
	}
}

// A checkpoint is restored only by the tally it was made for.
func TestTallyCheckpointRefused(t *testing.T) {
	log := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	tl := NewTally().ForgetFinished()
	tl.Apply(Record{Seq: 1, Event: randomEvent(rand.New(rand.NewPCG(1, 1)), randomJobIDs(rand.New(rand.NewPCG(1, 1))))})
	b, _, err := tl.Checkpoint(log)
	require.NoError(t, err)
	require.NoError(t, NewTally().ForgetFinished().RestoreCheckpoint(b, log))

	other := strings.Replace(string(b), fmt.Sprintf(`"format":%d`, TallyCheckpointFormat), `"format":999`, 1)
	for name, c := range map[string]struct {
		tally *Tally
		b     []byte
		log   time.Time
	}{
		"another format":           {NewTally().ForgetFinished(), []byte(other), log},
		"another log":              {NewTally().ForgetFinished(), b, log.Add(time.Nanosecond)},
		"a tally that remembers":   {NewTally(), b, log},
		"a tally already counting": {tl, b, log},
		"not JSON":                 {NewTally().ForgetFinished(), []byte("{"), log},
		"torn packed jobs":         {NewTally().ForgetFinished(), []byte(`{"format":1,"log":"2026-12-05T10:00:00Z","forget":true,"packed":"AAE="}`), log},
		"the head of one in parts": {NewTally().ForgetFinished(), []byte(`{"parts_format":1,"log":"2026-12-05T10:00:00Z","forget":true,"parts":{"id":"1.0a0b0c0d","n":2,"bytes":9,"sha256":"00"}}`), log},
	} {
		before := c.tally.Counts()
		err := c.tally.RestoreCheckpoint(c.b, c.log)
		require.ErrorIs(t, err, ErrTallyCheckpoint, name)
		require.Equal(t, before, c.tally.Counts(), name)
	}
}

// A tally that keeps too many jobs in memory makes no checkpoint.
func TestTallyCheckpointBounded(t *testing.T) {
	defer func(n int) { checkpointLimit = n }(checkpointLimit)
	checkpointLimit = 64 << 10
	tl := NewTally()
	for i := range checkpointLimit/17 + 1 {
		tl.jobs[hexID{byte(i), byte(i >> 8), byte(i >> 16)}] = 1
	}
	_, _, err := tl.Checkpoint(time.Now())
	require.ErrorContains(t, err, "over")
}

// TestTallyCheckpointFormatPinned fails when a tally's fields change: a
// checkpoint holds them, so a change must raise TallyCheckpointFormat (and
// then this list), or an engine would restore a checkpoint it reads
// otherwise.
func TestTallyCheckpointFormatPinned(t *testing.T) {
	var b strings.Builder
	for _, v := range []any{Tally{}, TallyCounts{}, jobTally{}, waiting{}, checkpoint{}} {
		typ := reflect.TypeOf(v)
		fmt.Fprintf(&b, "%s{", typ.Name())
		for i := range typ.NumField() {
			f := typ.Field(i)
			fmt.Fprintf(&b, "%s %s;", f.Name, f.Type)
		}
		b.WriteString("}\n")
	}
	require.Equal(t, 2, TallyCheckpointFormat, "raise the format in this test too")
	require.Equal(t, strings.TrimSpace(`
Tally{mu sync.Mutex;seq uint64;ver uint64;jobs map[projections.hexID]projections.packedJob;wide map[string]projections.jobTally;c projections.TallyCounts;recent []string;doubled []string;reconciling map[string]projections.waiting;forget bool;log time.Time;end uint64;caughtUp bool;}
TallyCounts{Seq uint64;Jobs map[aggregate.Status]int;Events map[string]uint64;Sends map[string]uint64;Rotations map[string]uint64;Reconciliations map[string]uint64;Checks map[string]uint64;Purchases uint64;ResultPages uint64;ChargedPages uint64;DoubleCharges int;APIDoubleCharges int;APIDoubleJobs int;Undecodable uint64;CaughtUp bool;}
jobTally{status aggregate.Status;purchases int;repurchases int;apiDoubles int;checking bool;}
waiting{reason string;since time.Time;}
checkpoint{Format int;Log time.Time;Seq uint64;Ver uint64;Forget bool;Counts projections.TallyCounts;Packed []uint8;Wide map[string]projections.checkpointJob;Recent []string;Doubled []string;Reconciling map[string]projections.checkpointQueue;}
`), strings.TrimSpace(b.String()))
}

// TestTallyCheckpointOfManyJobs: the jobs go into the checkpoint's base64 a
// few hundred at a time; any number of them comes back as it was.
func TestTallyCheckpointOfManyJobs(t *testing.T) {
	log := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	for _, n := range []int{0, 1, 2, 767, 768, 769, 2000, 2305} {
		tl := NewTally().ForgetFinished()
		for i := range n {
			tl.jobs[hexID{byte(i), byte(i >> 8), 7, byte(i % 5)}] = packedJob(i % 3)
		}
		tl.seq = uint64(n) + 1
		b, _, err := tl.Checkpoint(log)
		require.NoError(t, err)
		require.True(t, json.Valid(b), "%d jobs", n)
		again := NewTally().ForgetFinished()
		require.NoError(t, again.RestoreCheckpoint(b, log), "%d jobs", n)
		require.Equal(t, tl.jobs, again.jobs, "%d jobs", n)
		require.Equal(t, tl.seq, again.seq)
	}
}
