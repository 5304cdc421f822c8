package projections

import (
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// TestTallyAgreesWithTheModel feeds random logs, events in any order as
// facts may come, to a Tally, to a Tally that lets finished jobs go (given
// a job's earlier events whenever it asks for them) and to modelTally,
// which remembers every job, and requires the same totals, queue and
// recent jobs of both after every record; the forgetful one holds no
// finished job.
func TestTallyAgreesWithTheModel(t *testing.T) {
	for seed := range seeds(30) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			ids := randomJobIDs(rng)
			tally, forgetful, model := NewTally(), NewTally().ForgetFinished(), newModelTally()
			history := map[string][]events.Event{}
			asked := 0
			seq := uint64(0)
			for step := range 1500 {
				switch n := rng.IntN(100); {
				case n < 3:
					seq++
					for _, f := range []interface{ Undecodable(uint64) }{tally, forgetful, model} {
						f.Undecodable(seq)
					}
				case n < 6 && seq > 0: // a record seen before
					r := Record{Seq: 1 + rng.Uint64N(seq), Event: randomEvent(rng, ids)}
					require.True(t, forgetful.Apply(r), "skipped, not left for its history")
					tally.Apply(r)
					model.Apply(r)
				default:
					seq++
					e := randomEvent(rng, ids)
					e.Version = uint64(len(history[e.JobID])) + 1
					r := Record{Seq: seq, Event: e}
					if !forgetful.Apply(r) {
						asked++
						forgetful.ApplyWithHistory(r, history[e.JobID])
					}
					tally.Apply(r)
					model.Apply(r)
					history[e.JobID] = append(history[e.JobID], e)
				}
				limit := rng.IntN(8)
				wantQ, wantN := model.Reconciling(limit)
				for _, got := range []*Tally{tally, forgetful} {
					require.Equal(t, model.Counts(), got.Counts(), "step %d", step)
					require.Equal(t, model.Recent(), got.Recent(), "step %d", step)
					gotQ, gotN := got.Reconciling(limit)
					require.Equal(t, wantN, gotN, "step %d", step)
					require.Equal(t, wantQ, gotQ, "step %d", step)
				}
			}
			requireKeptOnce(t, tally, ids)
			require.Positive(t, asked, "finished jobs came back")
			for _, p := range forgetful.jobs {
				require.True(t, p.unpack().live(), "a finished job is kept")
			}
			for id, j := range forgetful.wide {
				require.True(t, j.live(), "finished job %q is kept", id)
			}
			require.Less(t, forgetful.Remembered(), tally.Remembered())
		})
	}
}

// requireKeptOnce checks that a Tally keeps each job in one place only,
// in a byte whenever it can, and lets an empty queue go; and that the log
// made it use both forms for hex ids.
func requireKeptOnce(t *testing.T, tally *Tally, ids jobIDs) {
	t.Helper()
	packed, spilled := 0, 0
	for _, id := range ids.all {
		h, isHex := parseHexID(id)
		p, inJobs := tally.jobs[h]
		inJobs = inJobs && isHex
		j, inWide := tally.wide[id]
		require.False(t, inJobs && inWide, "job %q is kept twice", id)
		require.False(t, inJobs && p == 0 || inWide && j == jobTally{}, "job %q is kept with nothing in it", id)
		if inWide {
			_, fits := pack(j)
			require.False(t, isHex && fits, "job %q could be packed: %+v", id, j)
			if isHex {
				spilled++
			}
		}
		if inJobs {
			packed++
		}
	}
	require.Positive(t, packed, "hex jobs kept in a byte")
	require.Positive(t, spilled, "hex jobs with too many purchases to pack")
	if tally.reconciling != nil {
		require.NotEmpty(t, tally.reconciling)
	}
}

// jobIDs are the ids of a random log: a hundred hex ids as aggregate.JobID
// makes them, and a few hot ones that get half the events, among them the
// same digits in upper case and ids that are not 32 hex digits.
type jobIDs struct{ all, hot []string }

func randomJobIDs(rng *rand.Rand) jobIDs {
	var ids jobIDs
	for range 100 {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		ids.all = append(ids.all, hex.EncodeToString(b[:]))
	}
	a := ids.all
	ids.hot = []string{a[0], a[1], a[2], strings.ToUpper(a[0]), a[1][:31], a[2] + "0", "job-01jd2n8x", "x", ""}
	ids.all = append(ids.all, ids.hot[3:]...)
	return ids
}

func (ids jobIDs) pick(rng *rand.Rand) string {
	if rng.IntN(2) == 0 {
		return ids.hot[rng.IntN(len(ids.hot))]
	}
	return ids.all[rng.IntN(len(ids.all))]
}

func randomEvent(rng *rand.Rand, ids jobIDs) events.Event {
	pick := func(s ...string) string { return s[rng.IntN(len(s))] }
	var data events.Payload
	switch rng.IntN(14) {
	case 0:
		data = events.JobScheduled{}
	case 1:
		data = events.AttemptCreated{}
	case 2:
		data = events.Sent{}
	case 3, 4:
		data = events.OutcomeClassified{
			Class:  pick("unknown", "retryable", "replay_unavailable", "in_progress", "failure"),
			Action: pick("retry_same_key", "retry_new_key", "reconcile", "reconcile", "fail", "store", ""),
		}
	case 5:
		data = events.KeyRotated{Reason: pick("search_timeout", "repurchase", "not_charged")}
	case 6:
		data = events.DeadlineReached{Reason: pick("replay_deadline", "age_budget")}
	case 7:
		r := events.Reconciled{Verdict: pick(aggregate.VerdictCharged, aggregate.VerdictNotCharged)}
		for range rng.IntN(3) {
			// Each charge once: a reconciliation lists only charges the
			// job had not accounted for (aggregate.Verify checks).
			r.Entries = append(r.Entries, events.LedgerEntry{RequestID: fmt.Sprintf("req_%x", rng.Uint64()), BilledPages: rng.IntN(4) - 1})
		}
		data = r
	case 8, 9:
		data = events.ObservationStored{Key: "k", Pages: rng.IntN(5) - 1, CheckCharges: rng.IntN(3) == 0}
	case 13:
		c := events.ChargesChecked{Key: "k", Verdict: aggregate.VerdictConfirmed}
		for range rng.IntN(3) {
			c.Entries = append(c.Entries, events.LedgerEntry{RequestID: fmt.Sprintf("req_%x", rng.Uint64()), Key: "k", BilledPages: 1})
		}
		if c.Charges = len(c.Entries); c.Charges > 1 {
			c.Verdict = aggregate.VerdictDoubleCharge
		}
		data = c
	case 10:
		data = events.JobFailed{Reason: pick(aggregate.ReasonAPIError, aggregate.ReasonKeyBudget)}
	case 11:
		data = events.JobCancelled{By: "ops"}
	case 12:
		if rng.IntN(4) > 0 {
			data = events.RepurchaseAuthorized{By: "ops"}
		} // else no payload at all
	}
	return events.Event{
		JobID: ids.pick(rng),
		// Few distinct times, so that the queue's order often falls to ids.
		Time: time.Date(2026, 12, 2, 14, rng.IntN(4), 0, 0, time.UTC),
		Data: data,
	}
}

func TestPackedJob(t *testing.T) {
	for _, s := range append(aggregate.Statuses(), aggregate.StatusNew) {
		for p := range 4 {
			for r := range 4 {
				j := jobTally{status: s, purchases: p, repurchases: r}
				b, ok := pack(j)
				require.True(t, ok, "%+v", j)
				require.Equal(t, j, b.unpack())
			}
		}
	}
	j := jobTally{status: aggregate.StatusSucceeded, purchases: 1, checking: true}
	b, ok := pack(j)
	require.True(t, ok, "a succeeded job checking its charges packs")
	require.Equal(t, j, b.unpack())
	for _, j := range []jobTally{
		{status: aggregate.StatusSucceeded, apiDoubles: 1},
		{status: aggregate.StatusFailed, checking: true},
		{status: aggregate.StatusSucceeded, purchases: 4},
		{status: aggregate.StatusRetrying, repurchases: 4},
		{status: aggregate.StatusChargedNoResult, purchases: -1},
		{status: aggregate.Status("some_new_state")},
	} {
		_, ok := pack(j)
		require.False(t, ok, "%+v", j)
	}
}

func TestParseHexID(t *testing.T) {
	id := aggregate.JobID(time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC), `{"q":"x"}`)
	h, ok := parseHexID(id)
	require.True(t, ok)
	require.Equal(t, id, hex.EncodeToString(h[:]))
	for _, other := range []string{strings.ToUpper(id), id[:31], id + "0", id[:31] + "g", "job-" + id[4:], ""} {
		_, ok := parseHexID(other)
		require.False(t, ok, "%q", other)
	}
}
