package projections_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

const (
	// benchJobs is how many finished jobs the benchmark's log holds.
	benchJobs = 100_000
	// benchInFlight is how many jobs the log interleaves at a time, as an
	// engine with that many jobs in flight writes them.
	benchInFlight = 64
)

var tallyLog struct {
	once sync.Once
	recs []projections.Record
}

// finishedJobsLog is the log of benchJobs jobs, every one finished: most
// succeed at once, some after an unknown outcome or a new key, some fail,
// some are charged without a result, some are cancelled. It is built once
// per test binary.
func finishedJobsLog(b *testing.B) []projections.Record {
	tallyLog.once.Do(func() {
		ids := projectionstest.IDsFrom(0)
		var window [][]events.Event
		flush := func() {
			for _, r := range projectionstest.Interleave(window) {
				r.Seq = uint64(len(tallyLog.recs) + 1)
				tallyLog.recs = append(tallyLog.recs, r)
			}
			window = window[:0]
		}
		for i := range benchJobs {
			window = append(window, finishedJob(b, ids, i))
			if len(window) == benchInFlight {
				flush()
			}
		}
		flush()
	})
	return tallyLog.recs
}

// finishedJob is the log of job i, which ends in a terminal state.
func finishedJob(b *testing.B, ids *projectionstest.IDs, i int) []events.Event {
	j := projectionstest.NewJob(b, ids, fmt.Sprintf("query %d", i), projectionstest.T0)
	req := func(n int) string { return fmt.Sprintf("req_%d_%d", i, n) }
	success := func(n int) {
		j.Reply(aggregate.Outcome{Status: 200, RequestID: req(n), Result: projectionstest.Result(req(n), 1), Pages: 1})
	}
	switch i % 20 {
	case 14, 15: // an unknown outcome, then a replay
		j.Send()
		j.Reply(aggregate.Outcome{Unknown: "timeout"})
		j.Send()
		success(1)
	case 16: // a 408 and a new key
		j.Send()
		j.Reply(aggregate.Outcome{Status: 408, Code: "search_timeout", RequestID: req(1)})
		j.Send()
		success(2)
	case 17: // a confirmed failure
		j.Send()
		j.Reply(aggregate.Outcome{Status: 401, Code: "unauthorized", Message: "bad token", RequestID: req(1)})
	case 18: // a lost response the billing ledger finds charged
		j.Send()
		j.Reply(aggregate.Outcome{Status: 409, Code: "idempotency_replay_unavailable", RequestID: req(1)})
		key, _ := j.Key()
		j.Do(aggregate.LedgerAnswer{Keys: []string{key}, RequestIDs: []string{req(1)}, Entries: []events.LedgerEntry{
			{RequestID: req(1), Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: j.Now}}})
	case 19: // cancelled before its first send
		j.Do(aggregate.Cancel{By: "ops", Reason: "not needed"})
	default: // a plain success
		j.Send()
		success(1)
	}
	if !j.S.Status.Terminal() {
		b.Fatalf("job %d ends %s", i, j.S.Status)
	}
	return j.Log
}

// BenchmarkTallyFinishedJobs applies the log of benchJobs finished jobs to
// a new Tally and reports the live heap the Tally keeps per job (B/job)
// and the time to apply one event (ns/event). Each event's job id is a
// fresh string, as the decoder of the fold gives it, so ids the Tally keeps
// are counted. The collector is off while the events are applied, so that
// ns/event does not count collecting the benchmark's own log. "forget" is
// the tally serpent run keeps, which lets finished jobs go.
func BenchmarkTallyFinishedJobs(b *testing.B) {
	recs := finishedJobsLog(b)
	for _, mode := range []struct {
		name string
		new  func() *projections.Tally
	}{{"remember", projections.NewTally}, {"forget", func() *projections.Tally { return projections.NewTally().ForgetFinished() }}} {
		b.Run(mode.name, func(b *testing.B) { benchTally(b, recs, mode.new) })
	}
}

func benchTally(b *testing.B, recs []projections.Record, newTally func() *projections.Tally) {
	var perJob float64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tally := newTally()
		gc := debug.SetGCPercent(-1)
		b.StartTimer()
		for _, r := range recs {
			r.Event.JobID = strings.Clone(r.Event.JobID)
			tally.Apply(r)
		}
		b.StopTimer()
		debug.SetGCPercent(gc)
		runtime.GC()
		runtime.ReadMemStats(&after)
		perJob = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / benchJobs
		c := tally.Counts()
		finished := 0
		for s, n := range c.Jobs {
			if s.Terminal() {
				finished += n
			}
		}
		if _, queued := tally.Reconciling(0); finished != benchJobs || queued != 0 || c.DoubleCharges != 0 {
			b.Fatalf("%d jobs finished, %d reconciling, %d double charges; want %d, 0, 0", finished, queued, c.DoubleCharges, benchJobs)
		}
		runtime.KeepAlive(tally)
		b.StartTimer()
	}
	b.ReportMetric(perJob, "B/job")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/event")
}
