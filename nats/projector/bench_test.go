package projector_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	gosync "sync"
	"syscall"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"

	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// The benchmarks run against an embedded server on this machine. The
// figures and the commands are in docs/performance.md.

// benchLog fills SERP_EVENTS with about n events (jobs of 4 to 7 events,
// a thousand jobs interleaved at a time) and returns the server, which
// fsyncs every sync (0: every write, as serpent run's embedded server).
func benchLog(b *testing.B, n int, sync time.Duration) *natstest.Server {
	b.Helper()
	srv := natstest.RunServer(b, func(c *snats.EmbeddedConfig) { c.SyncInterval = sync })
	ctx := context.Background()
	if _, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{}); err != nil {
		b.Fatal(err)
	}
	const window = 1000
	written := 0
	for base := 0; written < n; base += window {
		jobs := make([][][]byte, window)
		var wg gosync.WaitGroup
		per := window / runtime.GOMAXPROCS(0)
		for w := 0; w < window; w += per {
			wg.Add(1)
			go func(lo, hi int) {
				defer wg.Done()
				ids := projectionstest.IDsFrom(uint64(base+lo) * 100)
				for i := lo; i < min(hi, window); i++ {
					jobs[i] = projectionstest.BenchJob(b, ids, base+i)
				}
			}(w, w+per)
		}
		wg.Wait()
		for k := 0; ; k++ {
			more := false
			for _, j := range jobs {
				if k >= len(j) {
					continue
				}
				more = true
				e, err := projectionsDecodeHeader(j[k])
				if err != nil {
					b.Fatal(err)
				}
				m := natsgo.NewMsg(snats.EventSubjectPrefix + e.JobID)
				m.Data = j[k]
				m.Header.Set(events.HeaderMsgID, e.ID)
				m.Header.Set(events.HeaderType, e.Type())
				if _, err := srv.JS.PublishMsgAsync(m); err != nil {
					b.Fatal(err)
				}
				written++
				if srv.JS.PublishAsyncPending() >= 2000 {
					<-srv.JS.PublishAsyncComplete()
				}
			}
			if !more {
				break
			}
		}
		select {
		case <-srv.JS.PublishAsyncComplete():
		case <-time.After(time.Minute):
			b.Fatal("publishing stalled")
		}
	}
	return srv
}

func projectionsDecodeHeader(b []byte) (events.Event, error) { return events.Decode(b) }

// BenchmarkAuditLog reads, decodes, folds and checks every event of the
// log, as serpent audit does (with GOGC=400, as serpent audit sets it):
// snats.AuditLog and audit.CheckLog, here beside the log benchLog fills.
func BenchmarkAuditLog(b *testing.B) {
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			srv := benchLog(b, n, time.Minute) // filling is setup, not measured
			ctx := context.Background()
			st, err := srv.JS.Stream(ctx, snats.EventStream)
			if err != nil {
				b.Fatal(err)
			}
			total := st.CachedInfo().State.Msgs
			b.ResetTimer()
			cpu0 := cpuTime()
			for b.Loop() {
				log, err := snats.NewAuditLog(ctx, snats.EventLog(srv.JS), 0, nil)
				if err != nil {
					b.Fatal(err)
				}
				a, err := audit.CheckLog(ctx, log, audit.Options{Now: projectionstest.T0.Add(48 * time.Hour)})
				if err != nil {
					b.Fatal(err)
				}
				rep := a.Report()
				if !rep.OK() || uint64(rep.Events) != total {
					b.Fatalf("%d events, %d violations: %v", rep.Events, len(rep.Violations), rep.Violations[:min(3, len(rep.Violations))])
				}
			}
			b.ReportMetric(float64(total)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}

// startProfile starts a CPU profile into file, if one is named, and
// returns what stops it. A file written before is overwritten: it ends up
// with the last run's profile.
func startProfile(b *testing.B, file string) func() {
	if file == "" {
		return func() {}
	}
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the CPU time this process used, server included: on a shared
// machine it says more than the wall clock.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runnerProfile names a file for a CPU profile of BenchmarkRunner's
// catch-ups alone, without the filling of the log (-cpuprofile takes both).
var runnerProfile = flag.String("runnerprofile", "", "write a CPU profile of BenchmarkRunner's catch-ups to this file")

// BenchmarkRunner measures projection throughput: a runner catching up
// from nothing with a log of 20,000 or 200,000 events, on a server that
// fsyncs every write (as serpent run's embedded one). The log is filled
// on a server that fsyncs less often, then restarted, as filling is setup.
//
//	go test ./nats/projector -run '^$' -bench 'Runner/events=200000' -benchtime 1x -args -runnerprofile cpu.out
func BenchmarkRunner(b *testing.B) {
	for _, n := range []int{20_000, 200_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			var applied uint64
			var cpu time.Duration
			writes := 0
			for range b.N {
				b.StopTimer()
				srv := benchLog(b, n, time.Minute)
				srv.Restart(b, func(c *snats.EmbeddedConfig) { c.SyncInterval = 0 })
				ctx := context.Background()
				st, err := srv.JS.Stream(ctx, snats.EventStream)
				if err != nil {
					b.Fatal(err)
				}
				last := st.CachedInfo().State.LastSeq
				r, err := projector.New(ctx, srv.JS, projector.Config{Name: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				runCtx, cancel := context.WithCancel(ctx)
				done := make(chan struct{})
				cpu0 := cpuTime()
				stopProfile := startProfile(b, *runnerProfile)
				b.StartTimer()
				go func() { defer close(done); _ = r.Run(runCtx) }()
				deadline := time.Now().Add(10 * time.Minute)
				tick := time.NewTicker(2 * time.Millisecond)
				for r.Stats().LastSeq < last && time.Now().Before(deadline) {
					<-tick.C // polling the runner's own counter, bounded
				}
				tick.Stop()
				b.StopTimer()
				stopProfile()
				cpu += cpuTime() - cpu0
				cancel()
				<-done
				if r.Stats().LastSeq < last {
					b.Fatalf("the runner applied up to %d of %d", r.Stats().LastSeq, last)
				}
				applied += last
				writes += r.Stats().Writes
				srv.Shutdown()
			}
			b.ReportMetric(float64(applied)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(cpu.Microseconds())/float64(applied), "cpu-µs/event")
			b.ReportMetric(float64(writes)/float64(applied), "writes/event")
		})
	}
}

// BenchmarkViewKeyIndex measures what a job's keys in the views cost the
// server's memory: a job's four values (status, observation, and its job
// and attempt-key ledgers), each with a 30-day TTL, as the projector
// writes them. It reports the server's heap a key, as the growth between
// a fifth of the jobs and all of them, so the fixed costs cancel out.
//
//	go test ./nats/projector -run '^$' -bench ViewKeyIndex -benchtime 1x
func BenchmarkViewKeyIndex(b *testing.B) {
	const jobs = 250_000
	srv := natstest.RunServer(b)
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := projector.New(ctx, srv.JS, projector.Config{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	value := []byte(strings.Repeat("v", 100))
	put := func(from, to int) {
		for i := from; i < to; i++ {
			id := fmt.Sprintf("%032x", i)
			for _, subj := range []string{"$KV.serp_status." + id, "$KV.serp_observations." + id,
				"$KV.serp_ledger.job." + id, "$KV.serp_ledger.key." + id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]} {
				m := natsgo.NewMsg(subj)
				m.Data = value
				m.Header.Set("Nats-TTL", "720h")
				if _, err := srv.JS.PublishMsgAsync(m); err != nil {
					b.Fatal(err)
				}
			}
			if i%1000 == 999 {
				<-srv.JS.PublishAsyncComplete()
			}
		}
		<-srv.JS.PublishAsyncComplete()
	}
	heap := func() float64 {
		runtime.GC()
		debug.FreeOSMemory()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapInuse)
	}
	for b.Loop() {
		put(0, jobs/5)
		before := heap()
		put(jobs/5, jobs)
		after := heap()
		b.ReportMetric((after-before)/float64(4*(jobs-jobs/5)), "heap-B/key")
	}
}
