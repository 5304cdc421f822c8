package nats_test

import (
	"context"
	"fmt"
	"testing"

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
