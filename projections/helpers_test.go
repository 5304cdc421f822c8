package projections_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

var t0 = projectionstest.T0

func sampleLog(t testing.TB) [][]events.Event { return projectionstest.SampleLog(t) }

func interleave(jobs [][]events.Event) []projections.Record { return projectionstest.Interleave(jobs) }

func result(id string, pages int) []byte { return projectionstest.Result(id, pages) }

// unusualLog is three jobs on the paths SampleLog does not take: unknown
// outcomes until the key's deadline, a reconciliation that finds nothing
// charged and a new key bought (g); a 429 with Retry-After, a timeout and
// a replayed success across midnight (h); a job cancelled before it ran
// (i).
func unusualLog(t *testing.T) [][]events.Event {
	ids := projectionstest.IDsFrom(5000)
	var jobs [][]events.Event
	g := projectionstest.NewJob(t, ids, "deadline", t0)
	for i := 0; i < 40 && g.S.Status != aggregate.StatusReconciling; i++ {
		g.Send()
		if g.S.Status == aggregate.StatusReconciling {
			break
		}
		g.Reply(aggregate.Outcome{Unknown: "timeout"})
	}
	require.Equal(t, aggregate.StatusReconciling, g.S.Status)
	g.Now = g.S.Settled().Add(time.Second)
	q := g.S.ReconcileQuery()
	g.Do(aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs})
	g.Send()
	g.Reply(aggregate.Outcome{Status: 200, RequestID: "req_g", Result: result("req_g", 3), Pages: 3})
	jobs = append(jobs, g.Log)

	h := projectionstest.NewJob(t, ids, "ratelimited", t0.Add(9*time.Hour+58*time.Minute))
	h.Send()
	h.Reply(aggregate.Outcome{Status: 429, Code: "rate_limited", RequestID: "req_h1", RetryAfter: 30 * time.Second})
	h.Send()
	h.Reply(aggregate.Outcome{Unknown: "timeout"})
	h.Send()
	h.Reply(aggregate.Outcome{Status: 200, RequestID: "req_h2", Replayed: true, Result: result("req_h2", 1), Pages: 1})
	jobs = append(jobs, h.Log)

	i := projectionstest.NewJob(t, ids, "cancel me", t0.Add(time.Hour))
	i.Do(aggregate.Cancel{By: "ops", Reason: "no longer needed"})
	jobs = append(jobs, i.Log)
	for _, j := range jobs {
		require.Empty(t, aggregate.Verify(j))
	}
	return jobs
}
