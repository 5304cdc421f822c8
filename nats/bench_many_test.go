package nats_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/store"
	"github.com/serpent-engine/serpent/store/storetest"
)

// BenchmarkAppendManySizes group-commits one event for each of n jobs, for
// several n, with the expected-sequence check on every append.
func BenchmarkAppendManySizes(b *testing.B) {
	for _, jobs := range []int{50, 300, 900} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			es := benchStore(b)
			ctx := context.Background()
			for b.Loop() {
				appends := make([]store.Append, jobs)
				for i := range appends {
					job := storetest.NewJobID()
					appends[i] = store.Append{JobID: job, Events: storetest.NewEvents(job, 1, 1)}
				}
				for _, r := range es.AppendMany(ctx, appends) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			b.ReportMetric(float64(jobs*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkSmallGroupCommit group-commits one event for each of n jobs,
// as plain messages in flight together (the default for a small group) and
// as one atomic batch (PipelineMax -1), and reports the CPU time of the
// whole process (the server's and the client's) per group.
func BenchmarkSmallGroupCommit(b *testing.B) {
	for _, n := range []int{2, 4, 8, 12} {
		for _, mode := range []struct {
			name string
			max  int
		}{{"plain", 16}, {"atomic", -1}} {
			b.Run(fmt.Sprintf("jobs=%d/%s", n, mode.name), func(b *testing.B) {
				srv := natstest.RunServer(b)
				ctx := context.Background()
				if _, err := nats.EnsureEventStream(ctx, srv.JS, nats.EventStreamOptions{}); err != nil {
					b.Fatal(err)
				}
				es, err := nats.NewEventStore(ctx, srv.JS, nats.EventStoreOptions{PipelineMax: mode.max})
				if err != nil {
					b.Fatal(err)
				}
				cpu := processCPU()
				for b.Loop() {
					appends := make([]store.Append, n)
					for i := range appends {
						job := storetest.NewJobID()
						appends[i] = store.Append{JobID: job, Events: storetest.NewEvents(job, 1, 1)}
					}
					for _, r := range es.AppendMany(ctx, appends) {
						if r.Err != nil {
							b.Fatal(r.Err)
						}
					}
				}
				b.ReportMetric(float64((processCPU()-cpu).Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
