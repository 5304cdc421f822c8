package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// sampleRecords is projectionstest's six jobs, interleaved as a busy engine
// writes them.
func sampleRecords(t *testing.T) ([][]events.Event, []projections.Record) {
	t.Helper()
	jobs := projectionstest.SampleLog(t)
	return jobs, projectionstest.Interleave(jobs)
}

func TestTallyCountsTheLog(t *testing.T) {
	jobs, recs := sampleRecords(t)
	storedA := jobs[0][len(jobs[0])-1] // job a's ObservationStored
	require.IsType(t, events.ObservationStored{}, storedA.Data)

	tests := []struct {
		name  string
		recs  []projections.Record
		check func(t *testing.T, c projections.TallyCounts)
	}{
		{"the sample log", recs, func(t *testing.T, c projections.TallyCounts) {
			require.Equal(t, map[aggregate.Status]int{aggregate.StatusSucceeded: 4, aggregate.StatusFailed: 1,
				aggregate.StatusScheduled: 1, aggregate.StatusSending: 0, aggregate.StatusRetrying: 0,
				aggregate.StatusReconciling: 0, aggregate.StatusChargedNoResult: 0, aggregate.StatusCancelled: 0}, c.Jobs)
			require.Equal(t, map[string]uint64{"success": 4, "unknown": 1, "retryable": 1, "replay_unavailable": 1, "failure": 1}, c.Sends)
			require.Equal(t, map[string]uint64{"charged": 1}, c.Reconciliations)
			rotations := uint64(0)
			for _, n := range c.Rotations {
				rotations += n
			}
			require.EqualValues(t, 2, rotations, "c's new key after a 408 and d's re-purchase: %v", c.Rotations)
			require.EqualValues(t, 5, c.Purchases, "four observations and one charge without a result")
			require.EqualValues(t, 4, c.ResultPages)
			require.EqualValues(t, 1, c.ChargedPages)
			require.Zero(t, c.DoubleCharges, "d's second purchase was authorised")
			require.EqualValues(t, len(recs), c.Seq)
		}},
		{"an unauthorised second purchase", append(recs, projections.Record{Seq: uint64(len(recs) + 1), Event: storedA}),
			func(t *testing.T, c projections.TallyCounts) {
				require.Equal(t, 1, c.DoubleCharges)
				require.EqualValues(t, 6, c.Purchases)
			}},
		{"a reconciliation that found two charges", append(append([]projections.Record{}, recs...), projections.Record{Seq: uint64(len(recs) + 1),
			Event: events.Event{JobID: "0123456789abcdef0123456789abcdef", Version: 1, Data: events.Reconciled{
				Verdict: aggregate.VerdictCharged, Charges: 2, Entries: []events.LedgerEntry{{RequestID: "r1", Key: "k1"}, {RequestID: "r2", Key: "k2"}}}}}),
			func(t *testing.T, c projections.TallyCounts) {
				require.Equal(t, 1, c.DoubleCharges, "two charges for one job")
				require.EqualValues(t, 5+2, c.Purchases)
			}},
		{"a charge listed twice in one reconciliation counts once", append(append([]projections.Record{}, recs...), projections.Record{Seq: uint64(len(recs) + 1),
			Event: events.Event{JobID: "0123456789abcdef0123456789abcdef", Version: 1, Data: events.Reconciled{
				Verdict: aggregate.VerdictCharged, Charges: 2, Entries: []events.LedgerEntry{{RequestID: "r1", Key: "k1"}, {RequestID: "r1", Key: "k1"}}}}}),
			func(t *testing.T, c projections.TallyCounts) {
				require.Zero(t, c.DoubleCharges, "one charge, found once")
				require.EqualValues(t, 5+1, c.Purchases)
			}},
		{"events seen again count once", append(append([]projections.Record{}, recs...), recs...), func(t *testing.T, c projections.TallyCounts) {
			require.EqualValues(t, 5, c.Purchases)
			require.Equal(t, 4, c.Jobs[aggregate.StatusSucceeded])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tally := projections.NewTally()
			for _, r := range tt.recs {
				tally.Apply(r)
			}
			tt.check(t, tally.Counts())
		})
	}
}

func TestTallyStatesMatchTheFold(t *testing.T) {
	jobs, recs := sampleRecords(t)
	tally := projections.NewTally()
	for _, r := range recs {
		tally.Apply(r)
	}
	want := map[aggregate.Status]int{}
	for _, j := range jobs {
		want[aggregate.Fold(j).Status]++
	}
	got := tally.Counts().Jobs
	for s, n := range want {
		require.Equal(t, n, got[s], "state %s", s)
	}
	recent := tally.Recent()
	require.Len(t, recent, len(jobs))
	require.Equal(t, recs[len(recs)-1].Event.JobID, recent[0], "the last job changed comes first")
}

func TestTallyReconcilingQueue(t *testing.T) {
	ids := projectionstest.IDsFrom(0)
	var recs []projections.Record
	add := func(j *projectionstest.Job, from int) {
		for _, e := range j.Log[from:] {
			recs = append(recs, projections.Record{Seq: uint64(len(recs) + 1), Event: e})
		}
	}
	for i, q := range []string{"first", "second", "third"} {
		j := projectionstest.NewJob(t, ids, q, projectionstest.T0)
		j.Now = j.Now.Add(time.Duration(i) * time.Minute)
		j.Send()
		j.Reply(aggregate.Outcome{Status: 409, Code: "idempotency_replay_unavailable", RequestID: q})
		add(j, 0)
	}
	tally := projections.NewTally()
	for _, r := range recs {
		tally.Apply(r)
	}
	queue, n := tally.Reconciling(2)
	require.Equal(t, 3, n)
	require.Len(t, queue, 2)
	require.True(t, queue[0].Since.Before(queue[1].Since), "the longest waiting first")
	require.Equal(t, "replay_unavailable", queue[0].Reason)
	require.Equal(t, 3, tally.Counts().Jobs[aggregate.StatusReconciling])
}

// TestTallyCatchesUpToTheLogsEnd: a tally is caught up once it has
// applied everything up to where its reader said the log ended (events
// and undecodable messages alike), at once on an empty log, and stays
// so; an end found sooner counts.
func TestTallyCatchesUpToTheLogsEnd(t *testing.T) {
	_, recs := sampleRecords(t)
	require.Greater(t, len(recs), 3)

	tally := projections.NewTally()
	require.False(t, tally.Counts().CaughtUp, "not before its reader said where the log ends")
	end := recs[len(recs)-2].Seq
	tally.CatchUpTo(end)
	for _, r := range recs[:len(recs)-3] {
		require.True(t, tally.Apply(r))
		require.False(t, tally.Counts().CaughtUp, "at %d of %d", r.Seq, end)
	}
	tally.Undecodable(recs[len(recs)-3].Seq)
	require.False(t, tally.Counts().CaughtUp)
	require.True(t, tally.Apply(recs[len(recs)-2]))
	require.True(t, tally.Counts().CaughtUp, "at the end")
	tally.CatchUpTo(end + 100)
	require.True(t, tally.Counts().CaughtUp, "caught up stays so")

	empty := projections.NewTally()
	empty.CatchUpTo(0)
	require.True(t, empty.Counts().CaughtUp, "an empty log")

	sooner := projections.NewTally()
	sooner.CatchUpTo(recs[1].Seq + 10)
	require.True(t, sooner.Apply(recs[0]))
	require.True(t, sooner.Apply(recs[1]))
	sooner.CatchUpTo(recs[1].Seq)
	require.True(t, sooner.Counts().CaughtUp, "the end found sooner")
}

// TestTallyCountsGroups: the events of an append written as one message
// share its sequence; the tally counts each of them once, as it does
// events at sequences of their own, and skips them when fed again.
func TestTallyCountsGroups(t *testing.T) {
	jobs, single := sampleRecords(t)
	var grouped []projections.Record
	for i, j := range jobs { // each job one message, and the sample's sixth in two
		for k, e := range j {
			seq := uint64(2*i + 1)
			if k >= 3 {
				seq++
			}
			grouped = append(grouped, projections.Record{Seq: seq, Event: e})
		}
	}
	byJob := map[string][]events.Event{}
	for _, j := range jobs {
		byJob[j[0].JobID] = j
	}
	apply := func(tally *projections.Tally, r projections.Record) {
		if !tally.Apply(r) { // a finished job let go: its history is read
			tally.ApplyWithHistory(r, byJob[r.Event.JobID][:r.Event.Version-1])
		}
	}
	for _, forget := range []bool{false, true} {
		want, got := projections.NewTally(), projections.NewTally()
		if forget {
			want, got = want.ForgetFinished(), got.ForgetFinished()
		}
		for _, r := range single {
			apply(want, r)
		}
		for range 2 {
			for _, r := range grouped {
				apply(got, r)
			}
		}
		w, g := want.Counts(), got.Counts()
		w.Seq, g.Seq = 0, 0
		require.Equal(t, w, g, "forget finished jobs: %v", forget)
	}
}
