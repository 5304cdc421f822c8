package nats_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/nats"
)

// BenchmarkAppendManySizes group-commits one event for each of n jobs, for
// several n, with the expected-sequence check on every append.
func BenchmarkAppendManySizes(b *testing.B) {
	for _, jobs := range []int{50, 300, 900} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			es := benchStore(b)
			for b.Loop() {
				commitNewJobs(b, es, jobs)
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
				es := benchStoreWith(b, nats.EventStoreOptions{PipelineMax: mode.max})
				cpu := processCPU()
				for b.Loop() {
					commitNewJobs(b, es, n)
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
