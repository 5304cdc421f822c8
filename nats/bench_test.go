package nats_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/storetest"
	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// The benchmarks run against an embedded server with fsync on every write
// (the default), data in a temporary folder on the test machine's disk.
// docs/performance.md has the figures and how to reproduce them.

func benchStore(b *testing.B) *nats.EventStore {
	return benchStoreWith(b, nats.EventStoreOptions{})
}

// benchStoreWith starts a server with SERP_EVENTS and returns an event
// store on it with opts.
func benchStoreWith(b *testing.B, opts nats.EventStoreOptions) *nats.EventStore {
	b.Helper()
	srv := natstest.RunServer(b)
	ctx := context.Background()
	if _, err := nats.EnsureEventStream(ctx, srv.JS, nats.EventStreamOptions{}); err != nil {
		b.Fatal(err)
	}
	es, err := nats.NewEventStore(ctx, srv.JS, opts)
	if err != nil {
		b.Fatal(err)
	}
	return es
}

// commitNewJobs group-commits the first event of jobs new jobs.
func commitNewJobs(b *testing.B, es *nats.EventStore, jobs int) {
	appends := make([]eventstore.Append, jobs)
	for i := range appends {
		job := storetest.NewJobID()
		appends[i] = eventstore.Append{JobID: job, Events: storetest.NewEvents(job, 1, 1)}
	}
	for _, r := range es.AppendMany(context.Background(), appends) {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

// BenchmarkAppend appends to a new job: one event (a plain publish) or
// three in one atomic batch.
func BenchmarkAppend(b *testing.B) {
	for _, n := range []int{1, 3} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			es := benchStore(b)
			ctx := context.Background()
			for b.Loop() {
				job := storetest.NewJobID()
				if _, err := es.Append(ctx, job, 0, storetest.NewEvents(job, 1, n)...); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// BenchmarkAppendMany group-commits one event for each of 100 jobs per
// operation.
func BenchmarkAppendMany(b *testing.B) {
	const jobs = 100
	es := benchStore(b)
	for b.Loop() {
		commitNewJobs(b, es, jobs)
	}
	b.ReportMetric(float64(jobs*b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkLoad loads a job of 6 events from a stream holding 1,000 or
// 100,000 such jobs. Layout "spread" writes the stream round by round, so a
// job's 6 events lie about a round's worth of messages apart (at 100,000
// jobs, in 6 different 8 MB message blocks); "together" writes each job's 6
// events in one append. Direct gets with a subject filter use the stream's
// per-subject index, so the number of jobs itself costs nothing; what
// costs is how many message blocks a job's events touch that are not in
// the server's block cache.
func BenchmarkLoad(b *testing.B) {
	for _, layout := range []string{"spread", "together"} {
		for _, jobs := range []int{1_000, 100_000} {
			b.Run(fmt.Sprintf("layout=%s/jobs=%d", layout, jobs), func(b *testing.B) {
				es := benchStore(b)
				ids := fill(b, es, jobs, 6, layout == "together")
				// random jumps around the whole stream; hot loads the same
				// 16 jobs over and over, so their blocks stay cached and
				// only the lookup itself is measured.
				for _, access := range []struct {
					name string
					step int
					jobs []string
				}{{"random", 7919, ids}, {"hot", 1, ids[:16]}} {
					b.Run("access="+access.name, func(b *testing.B) {
						ctx := context.Background()
						i := 0
						for b.Loop() {
							evs, _, err := es.Load(ctx, access.jobs[i%len(access.jobs)])
							if err != nil || len(evs) != 6 {
								b.Fatalf("load: %d events, %v", len(evs), err)
							}
							i += access.step
						}
					})
				}
			})
		}
	}
}

// fill writes n events to each of jobs new jobs with group commits: one
// round per event, or all of a job's events in one append if together.
func fill(b *testing.B, es *nats.EventStore, jobs, n int, together bool) []string {
	b.Helper()
	ctx := context.Background()
	ids := make([]string, jobs)
	versions := make([]uint64, jobs)
	for i := range ids {
		ids[i] = storetest.NewJobID()
	}
	rounds, per := n, 1
	if together {
		rounds, per = 1, n
	}
	const chunk = 5_000
	for round := range rounds {
		for start := 0; start < jobs; start += chunk {
			end := min(start+chunk, jobs)
			appends := make([]eventstore.Append, 0, end-start)
			for k, id := range ids[start:end] {
				appends = append(appends, eventstore.Append{JobID: id, Expected: versions[start+k],
					Events: storetest.NewEvents(id, uint64(round+1), per)})
			}
			for k, r := range es.AppendMany(ctx, appends) {
				if r.Err != nil {
					b.Fatal(r.Err)
				}
				versions[start+k] = r.Version
			}
		}
	}
	return ids
}
