package nats_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/eventstore/storetest"
	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// BenchmarkSubjectsInStreams asks what spreading jobs over several event
// streams would change on the server: the same number of subjects
// (SERPENT_BENCH_SUBJECTS, default 200,000; one 100-byte message each) in
// one stream or in five. It reports the heap after the server restarts on
// them (the whole process's, in use after a collection: mostly the
// server's per-subject index), the restart's time, and per operation a
// publish to a new subject with expected last subject sequence 0 (a job's
// first append). Seeding relaxes fsync, which is setup; the server
// restarts with fsync on every write.
func BenchmarkSubjectsInStreams(b *testing.B) {
	subjects := 200_000
	if v := os.Getenv("SERPENT_BENCH_SUBJECTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("SERPENT_BENCH_SUBJECTS=%q: a number of subjects", v)
		}
		subjects = n
	}
	for _, streams := range []int{1, 5} {
		b.Run(fmt.Sprintf("subjects=%d/streams=%d", subjects, streams), func(b *testing.B) {
			ctx := context.Background()
			srv := natstest.RunServer(b, func(c *nats.EmbeddedConfig) { c.SyncInterval = time.Minute })
			for i := range streams {
				if _, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{Name: fmt.Sprintf("SPREAD_%d", i),
					Subjects: []string{fmt.Sprintf("spread.%d.*", i)}, Storage: jetstream.FileStorage}); err != nil {
					b.Fatal(err)
				}
			}
			data := make([]byte, 100)
			for i := range subjects {
				if _, err := srv.JS.PublishAsync(fmt.Sprintf("spread.%d.%s", i%streams, storetest.NewJobID()), data); err != nil {
					b.Fatal(err)
				}
				if i%10_000 == 0 {
					<-srv.JS.PublishAsyncComplete()
				}
			}
			<-srv.JS.PublishAsyncComplete()

			srv.Embedded.Shutdown() // not timed: it flushes what seeding left unsynced
			start := time.Now()
			srv.Restart(b, func(c *nats.EmbeddedConfig) { c.SyncInterval = 0 })
			for i := range streams {
				if _, err := srv.JS.Stream(ctx, fmt.Sprintf("SPREAD_%d", i)); err != nil {
					b.Fatal(err)
				}
			}
			restart := time.Since(start)
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)

			i := 0
			for b.Loop() {
				if _, err := srv.JS.Publish(ctx, fmt.Sprintf("spread.%d.%s", i%streams, storetest.NewJobID()), data,
					jetstream.WithExpectLastSequencePerSubject(0)); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(restart.Seconds(), "restart-s")
			b.ReportMetric(float64(m.HeapInuse)/(1<<20), "heap-MB")
		})
	}
}
