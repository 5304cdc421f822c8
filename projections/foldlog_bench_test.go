package projections_test

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// benchLog is the messages of jobs as the engine writes them: the events
// of one decision in one message (a group when there are several), jobs
// interleaved. A quarter of the jobs lose a reply and resend, a sixth get
// a 408 and a new key. It also returns how many events the messages hold.
func benchLog(b *testing.B, jobs int) ([][]byte, int) {
	ids := projectionstest.IDsFrom(0)
	perJob := make([][][]byte, jobs)
	n := 0
	for i := range perJob {
		j := projectionstest.NewJob(b, ids, "bench "+strconv.Itoa(i), projectionstest.T0.Add(time.Duration(i%1440)*time.Minute))
		done := 0
		cut := func() {
			enc := make([][]byte, 0, len(j.Log)-done)
			for _, e := range j.Log[done:] {
				m, err := events.Encode(e)
				if err != nil {
					b.Fatal(err)
				}
				enc = append(enc, m)
			}
			perJob[i] = append(perJob[i], events.Group(enc))
			n += len(j.Log) - done
			done = len(j.Log)
		}
		cut()
		j.Send()
		cut()
		switch i % 12 {
		case 0, 1, 2:
			j.Reply(aggregate.Outcome{Unknown: "timeout"})
			cut()
			j.Send()
			cut()
		case 3, 4:
			j.Reply(aggregate.Outcome{Status: 408, Code: "search_timeout", RequestID: "req_t" + strconv.Itoa(i)})
			cut()
			j.Send()
			cut()
		}
		j.Reply(aggregate.Outcome{Status: 200, RequestID: "req_" + strconv.Itoa(i), Result: projectionstest.BenchResult, Pages: 1})
		cut()
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

// BenchmarkFoldLog weighs reading a log of 2,000 jobs as the engine
// writes it (events.DecodeAll, and DecodeAllLight without results)
// against building every projection value from it (fold). Figures are
// per event; events.BenchmarkDecodeLog compares the decoder's paths.
func BenchmarkFoldLog(b *testing.B) {
	msgs, n := benchLog(b, 2000)
	var recs []projections.Record
	for i, m := range msgs {
		evs, err := events.DecodeAll(m)
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range evs {
			recs = append(recs, projections.Record{Seq: uint64(i + 1), Event: e})
		}
	}
	p := projections.New(projections.Config{})
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"decode", decodeEach(msgs, events.DecodeAll)},
		{"light", decodeEach(msgs, events.DecodeAllLight)},
		{"fold", func() error { _, err := p.Build(recs); return err }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			for b.Loop() {
				if err := tc.run(); err != nil {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&m1)
			events := float64(b.N) * float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
			b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/events, "allocs/event")
			b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/events, "B/event")
		})
	}
}

func decodeEach(msgs [][]byte, decode func([]byte) ([]events.Event, error)) func() error {
	return func() error {
		for _, m := range msgs {
			if _, err := decode(m); err != nil {
				return err
			}
		}
		return nil
	}
}
