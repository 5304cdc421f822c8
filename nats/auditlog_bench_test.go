package nats_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"syscall"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/audit"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// The figures and the commands are in docs/performance.md.

// benchEvents makes about n encoded events in memory, a thousand jobs
// interleaved at a time, as the projector's benchmarks write them.
func benchEvents(b *testing.B, n int) [][]byte {
	var out [][]byte
	ids := projectionstest.IDsFrom(0)
	for base := 0; len(out) < n; base += 1000 {
		jobs := make([][][]byte, 1000)
		for i := range jobs {
			jobs[i] = projectionstest.BenchJob(b, ids, base+i)
		}
		for k := 0; ; k++ {
			more := false
			for _, j := range jobs {
				if k < len(j) {
					out, more = append(out, j[k]), true
				}
			}
			if !more {
				break
			}
		}
	}
	return out
}

// BenchmarkAuditEvents is the audit without a server: decoding, folding
// and checking a recorded log held in memory.
func BenchmarkAuditEvents(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	evs := benchEvents(b, 1_000_000)
	msgs := make([]snats.Message, len(evs))
	for i, e := range evs {
		msgs[i] = snats.Message{Seq: uint64(i + 1), Data: e}
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		a, err := audit.CheckLog(context.Background(), snats.RecordedAuditLog(msgs, 0), audit.Options{Now: projectionstest.T0.Add(48 * time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		if rep := a.Report(); !rep.OK() || rep.Events != len(msgs) {
			b.Fatalf("%d events, %d violations", rep.Events, len(rep.Violations))
		}
	}
	b.ReportMetric(float64(len(msgs))*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
}

// BenchmarkAuditMemory is what the audit keeps of each job once it has
// read the whole log (the heap live after a collection, less the log
// itself, which the audit is given in memory), with and without what
// the join with the billing ledger needs.
func BenchmarkAuditMemory(b *testing.B) {
	evs := benchEvents(b, 1_000_000)
	msgs := make([]snats.Message, len(evs))
	for i, e := range evs {
		msgs[i] = snats.Message{Seq: uint64(i + 1), Data: e}
	}
	live := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for _, ledger := range []bool{true, false} {
		b.Run(fmt.Sprintf("ledger=%t", ledger), func(b *testing.B) {
			var perJob float64
			for b.Loop() {
				before := live()
				a, err := audit.CheckLog(context.Background(), snats.RecordedAuditLog(msgs, 0),
					audit.Options{Now: projectionstest.T0.Add(48 * time.Hour), WithoutLedger: !ledger})
				if err != nil {
					b.Fatal(err)
				}
				after := live()
				rep := a.Report()
				if !rep.OK() {
					b.Fatalf("%d violations", len(rep.Violations))
				}
				perJob = float64(after-before) / float64(rep.Jobs)
			}
			b.ReportMetric(perJob, "live-B/job")
		})
	}
}

// cpuTime is the CPU time this process used: on a shared machine it says
// more than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
