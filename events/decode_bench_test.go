package events_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// benchLog is the message bodies of jobs as the engine writes them, jobs
// interleaved: JobScheduled and AttemptCreated in one message, Sent, and
// an ObservationStored with a 2 KB result. A quarter of the jobs lose a
// reply (OutcomeClassified) and send again; a sixth get a 408 and a new
// key (OutcomeClassified and KeyRotated in one message) and send again.
// It also returns how many events the messages hold.
func benchLog(tb testing.TB, jobs int) ([][]byte, int) {
	s := samples()
	perJob := make([][][]byte, jobs)
	n := 0
	for i := range perJob {
		job := fmt.Sprintf("bench-%026d", i)
		at := t0.Add(time.Duration(i) * time.Second)
		version := uint64(0)
		msg := func(ps ...events.Payload) {
			enc := make([][]byte, len(ps))
			for k, p := range ps {
				n++
				version++
				b, err := events.Encode(events.Event{ID: sampleID(uint64(n)), JobID: job, Version: version, Time: at, Data: p})
				if err != nil {
					tb.Fatal(err)
				}
				enc[k] = b
			}
			perJob[i] = append(perJob[i], events.Group(enc))
		}
		msg(s[events.TypeJobScheduled], s[events.TypeAttemptCreated])
		msg(s[events.TypeSent])
		switch i % 12 {
		case 0, 1, 2:
			unknown := s[events.TypeOutcomeClassified].(events.OutcomeClassified)
			unknown.Status, unknown.Code, unknown.Unknown, unknown.Action = 0, "", "timeout", "resend"
			msg(unknown)
			msg(s[events.TypeSent])
		case 3, 4:
			msg(s[events.TypeOutcomeClassified], s[events.TypeKeyRotated])
			msg(s[events.TypeSent])
		}
		msg(events.ObservationStored{Key: sampleKey, RequestID: "req_bench", Pages: 1, Result: projectionstest.BenchResult})
	}
	var out [][]byte
	for k := 0; ; k++ {
		more := false
		for _, msgs := range perJob {
			if k < len(msgs) {
				out, more = append(out, msgs[k]), true
			}
		}
		if !more {
			return out, n
		}
	}
}

// BenchmarkDecodeLog reads a log of 2,000 jobs as the engine writes it
// with encoding/json alone, with DecodeAll (the fast path) and with
// DecodeAllLight. Figures are per event.
func BenchmarkDecodeLog(b *testing.B) {
	msgs, n := benchLog(b, 2000)
	for _, tc := range []struct {
		name   string
		decode func([]byte) ([]events.Event, error)
	}{{"json", events.DecodeAllJSON}, {"fast", events.DecodeAll}, {"light", events.DecodeAllLight}} {
		b.Run(tc.name, func(b *testing.B) {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for b.Loop() {
				for _, m := range msgs {
					if _, err := tc.decode(m); err != nil {
						b.Fatal(err)
					}
				}
			}
			runtime.ReadMemStats(&m1)
			evs := float64(b.N) * float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/evs, "ns/event")
			b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/evs, "allocs/event")
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/evs, "B/event")
		})
	}
}
