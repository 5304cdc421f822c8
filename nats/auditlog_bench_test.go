package nats_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// The figures and the commands are in docs/performance.md.

// benchResult is a result body of the size the sandbox returns (ten
// organic results, about 2 KB).
var benchResult = func() []byte {
	var b strings.Builder
	b.WriteString(`{"requestId":"req_bench","search":{"query":"espresso scale","country":"US","language":"en","device":"mobile","limit":10},"organic":[`)
	for i := 1; i <= 10; i++ {
		if i > 1 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"position":%d,"title":"Best espresso scale of the year, tested and reviewed","link":"https://news.example.net/espresso-scale/%d","snippet":"We weighed every espresso scale on the market so you do not have to."}`, i, 1000+i)
	}
	b.WriteString(`],"pages":1,"searchedAt":"2026-12-02T14:00:00Z"}`)
	return []byte(b.String())
}()

// benchJob is one job's encoded events: a plain success, a lost reply
// resent with the same key, or a 408 and a new key.
func benchJob(b testing.TB, ids *projectionstest.IDs, i int) [][]byte {
	j := projectionstest.NewJob(b, ids, "bench "+strconv.Itoa(i), projectionstest.T0.Add(time.Duration(i%1440)*time.Minute))
	ok := aggregate.Outcome{Status: 200, RequestID: "req_" + strconv.Itoa(i), Result: benchResult, Pages: 1}
	j.Send()
	switch i % 20 {
	case 0, 1, 2, 3, 4:
		j.Reply(aggregate.Outcome{Unknown: "timeout"})
		j.Send()
	case 5, 6, 7:
		j.Reply(aggregate.Outcome{Status: 408, Code: "search_timeout", RequestID: "req_t" + strconv.Itoa(i)})
		j.Send()
	}
	j.Reply(ok)
	out := make([][]byte, len(j.Log))
	for k, e := range j.Log {
		enc, err := events.Encode(e)
		if err != nil {
			b.Fatal(err)
		}
		out[k] = enc
	}
	return out
}

// benchEvents makes about n encoded events in memory, a thousand jobs
// interleaved at a time, as the projector's benchmarks write them.
func benchEvents(b *testing.B, n int) [][]byte {
	var out [][]byte
	ids := projectionstest.IDsFrom(0)
	for base := 0; len(out) < n; base += 1000 {
		jobs := make([][][]byte, 1000)
		for i := range jobs {
			jobs[i] = benchJob(b, ids, base+i)
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
