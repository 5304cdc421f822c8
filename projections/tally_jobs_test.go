package projections_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// feeder applies records to a tally with stream sequences from 1.
type feeder struct {
	tally *projections.Tally
	seq   uint64
}

func (f *feeder) apply(evs ...events.Event) {
	for _, e := range evs {
		f.seq++
		f.tally.Apply(projections.Record{Seq: f.seq, Event: e})
	}
}

// jobsIn are the non-zero job counts by state.
func jobsIn(c projections.TallyCounts) map[aggregate.Status]int {
	out := map[aggregate.Status]int{}
	for s, n := range c.Jobs {
		if n != 0 {
			out[s] = n
		}
	}
	return out
}

// A finished job can come back: charged without a result, bought again,
// lost again and cancelled. The tally follows it through, and the
// reconciling queue shows it each time it waits, since it began to.
func TestTallyFinishedJobComesBack(t *testing.T) {
	f := &feeder{tally: projections.NewTally()}
	j := projectionstest.NewJob(t, projectionstest.IDsFrom(0), "grinder", projectionstest.T0)
	done := 0
	step := func() projections.TallyCounts {
		f.apply(j.Log[done:]...)
		done = len(j.Log)
		return f.tally.Counts()
	}
	lost := func() {
		j.Send()
		j.Reply(aggregate.Outcome{Status: 409, Code: "idempotency_replay_unavailable", RequestID: "req_1"})
		c := step()
		require.Equal(t, map[aggregate.Status]int{aggregate.StatusReconciling: 1}, jobsIn(c))
		queue, n := f.tally.Reconciling(10)
		require.Equal(t, 1, n)
		require.Equal(t, []projections.Reconciling{{JobID: j.S.JobID, Reason: "replay_unavailable", Since: j.Now}}, queue)
	}

	lost()
	key, _ := j.Key()
	j.Do(aggregate.LedgerAnswer{Keys: []string{key}, RequestIDs: []string{"req_1"}, Entries: []events.LedgerEntry{
		{RequestID: "req_1", Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: j.Now}}})
	c := step()
	require.Equal(t, map[aggregate.Status]int{aggregate.StatusChargedNoResult: 1}, jobsIn(c))
	require.EqualValues(t, 1, c.Purchases)
	_, n := f.tally.Reconciling(10)
	require.Zero(t, n)

	j.Now = j.Now.Add(time.Hour)
	j.Do(aggregate.AuthorizeRepurchase{By: "ops", Reason: "customer needs it"})
	c = step()
	require.Equal(t, map[aggregate.Status]int{aggregate.StatusRetrying: 1}, jobsIn(c))

	j.Now = j.Now.Add(time.Hour)
	lost() // the queue shows the second wait, not the first

	j.Do(aggregate.Cancel{By: "ops", Reason: "too late now"})
	c = step()
	require.Equal(t, map[aggregate.Status]int{aggregate.StatusCancelled: 1}, jobsIn(c))
	require.EqualValues(t, 1, c.Purchases)
	require.Zero(t, c.DoubleCharges)
	_, n = f.tally.Reconciling(10)
	require.Zero(t, n)
	require.Equal(t, []string{j.S.JobID}, f.tally.Recent())
}

// Ids that are not 32 lowercase hex digits are jobs like any other, and
// the same digits in upper case are another job.
func TestTallyJobIDsThatAreNotHex(t *testing.T) {
	hexID := aggregate.JobID(projectionstest.T0, `{"q":"x"}`)
	ids := []string{hexID, strings.ToUpper(hexID), hexID[:31], hexID + "0", "job-01jd2n8xq4", "x"}
	f := &feeder{tally: projections.NewTally()}
	at := func(id string, d events.Payload) events.Event {
		return events.Event{JobID: id, Time: projectionstest.T0, Data: d}
	}
	for _, id := range ids {
		f.apply(at(id, events.JobScheduled{}))
	}
	for _, id := range ids {
		f.apply(at(id, events.OutcomeClassified{Class: "unknown", Action: string(aggregate.ActionReconcile)}))
	}
	queue, n := f.tally.Reconciling(len(ids))
	require.Equal(t, len(ids), n)
	for i, id := range slices.Sorted(slices.Values(ids)) {
		require.Equal(t, id, queue[i].JobID, "same since, so by id")
	}
	for _, id := range ids {
		f.apply(at(id, events.ObservationStored{Pages: 1}))
	}
	f.apply(at(hexID, events.ObservationStored{Pages: 1}))

	c := f.tally.Counts()
	require.Equal(t, map[aggregate.Status]int{aggregate.StatusSucceeded: len(ids)}, jobsIn(c))
	require.EqualValues(t, len(ids)+1, c.Purchases)
	require.Equal(t, 1, c.DoubleCharges, "only the lowercase id was bought twice")
	_, n = f.tally.Reconciling(len(ids))
	require.Zero(t, n)
	require.Equal(t, []string{hexID, "x", "job-01jd2n8xq4", hexID + "0", hexID[:31], strings.ToUpper(hexID)}, f.tally.Recent())
}

// A job with more purchases and re-purchases than the tally packs in a
// byte is still counted exactly.
func TestTallyManyPurchasesOfOneJob(t *testing.T) {
	for _, id := range []string{aggregate.JobID(projectionstest.T0, `{"q":"x"}`), "job-01jd2n8xq4"} {
		t.Run(id, func(t *testing.T) {
			f := &feeder{tally: projections.NewTally()}
			stored := events.Event{JobID: id, Time: projectionstest.T0, Data: events.ObservationStored{Pages: 1}}
			charged := events.Event{JobID: id, Time: projectionstest.T0, Data: events.Reconciled{Verdict: aggregate.VerdictCharged}}
			again := events.Event{JobID: id, Time: projectionstest.T0, Data: events.RepurchaseAuthorized{By: "ops"}}
			for i, step := range []struct {
				e       events.Event
				doubled int
				status  aggregate.Status
			}{
				{stored, 0, aggregate.StatusSucceeded},
				{stored, 1, aggregate.StatusSucceeded},
				{again, 0, aggregate.StatusRetrying},
				{charged, 1, aggregate.StatusChargedNoResult},
				{again, 0, aggregate.StatusRetrying},
				{stored, 1, aggregate.StatusSucceeded},
				{again, 0, aggregate.StatusRetrying},
				{again, 0, aggregate.StatusRetrying},
				{stored, 0, aggregate.StatusSucceeded},
				{stored, 1, aggregate.StatusSucceeded},
				{again, 0, aggregate.StatusRetrying},
				{again, 0, aggregate.StatusRetrying},
				{stored, 0, aggregate.StatusSucceeded},
			} {
				f.apply(step.e)
				c := f.tally.Counts()
				require.Equal(t, step.doubled, c.DoubleCharges, "step %d", i)
				require.Equal(t, map[aggregate.Status]int{step.status: 1}, jobsIn(c), "step %d", i)
			}
			require.EqualValues(t, 7, f.tally.Counts().Purchases)
		})
	}
}

// Live lists the jobs not finished, whatever their ids, and says whether
// the tally has caught up.
func TestTallyLive(t *testing.T) {
	hexID := aggregate.JobID(projectionstest.T0, `{"q":"live"}`)
	done := aggregate.JobID(projectionstest.T0, `{"q":"done"}`)
	for _, tally := range []*projections.Tally{projections.NewTally(), projections.NewTally().ForgetFinished()} {
		f := &feeder{tally: tally}
		at := func(id string, d events.Payload) events.Event {
			return events.Event{JobID: id, Time: projectionstest.T0, Data: d}
		}
		for _, id := range []string{hexID, done, "job-x"} {
			f.apply(at(id, events.JobScheduled{}))
		}
		f.apply(at(done, events.ObservationStored{Pages: 1}))
		live, caughtUp := tally.Live()
		var ids []string
		for i := range live.Len() {
			ids = append(ids, live.ID(i))
			k, ok := live.Index(live.ID(i))
			require.True(t, ok)
			require.Equal(t, i, k)
		}
		require.Equal(t, []string{hexID, "job-x"}, ids)
		_, ok := live.Index(done)
		require.False(t, ok, "a finished job is not in flight")
		require.False(t, caughtUp, "the log's end not noted yet")
		tally.CatchUpTo(f.seq)
		_, caughtUp = tally.Live()
		require.True(t, caughtUp)
	}
}
