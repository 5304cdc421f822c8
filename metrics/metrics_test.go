package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/eventstore/group"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/metrics"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
	"github.com/serpent-engine/serpent/serper"
)

// scrape returns the /metrics body of m.
func scrape(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	body, err := io.ReadAll(rec.Body)
	require.NoError(t, err)
	return string(body)
}

// TestScrape: the sample log, appended through the timed store and
// counted by a tally, shows in a scrape with the lag and the timings the
// hooks were given.
func TestScrape(t *testing.T) {
	ctx := context.Background()
	lag := func(context.Context) (metrics.Lag, error) {
		return metrics.Lag{}, errors.New("no projection runner here")
	}
	tally := projections.NewTally()
	m := metrics.New(metrics.Options{Tally: tally, Lag: lag, Worker: "w1", Version: "test"})
	st := memstore.New(memstore.Options{})
	c := group.New(st, group.Options{OnCommit: m.Committed})
	defer c.Close()
	store := m.TimeAppends(c)

	jobs := projectionstest.SampleLog(t)
	for _, j := range jobs {
		_, err := store.Append(ctx, j[0].JobID, 0, j...)
		require.NoError(t, err)
	}
	stale := jobs[0][1]
	stale.ID = projectionstest.IDsFrom(1000).EventID()
	_, err := store.Append(ctx, stale.JobID, 0, stale)
	require.Error(t, err, "a stale append is a conflict")
	m.Searched("", serper.Result{Confirmed: true, Status: 200, Latency: 120 * time.Millisecond})
	m.Searched("team-b", serper.Result{Unknown: serper.UnknownTimeout, Latency: 100 * time.Second})
	recs := projectionstest.Interleave(jobs)
	for _, r := range recs {
		tally.Apply(r)
	}
	n := recs[len(recs)-1].Seq
	tally.CatchUpTo(n)

	body := scrape(t, m)
	for _, want := range []string{
		`serpent_jobs{state="succeeded"} 4`,
		`serpent_jobs{state="failed"} 1`,
		`serpent_jobs{state="reconciling"} 0`,
		`serpent_sends_total{class="success"} 4`,
		`serpent_sends_total{class="unknown"} 1`,
		`serpent_reconciliations_total{verdict="charged"} 1`,
		`serpent_reconciliations_total{verdict="not_charged"} 0`,
		`serpent_purchases_total 5`,
		`serpent_billed_pages_total{source="observation"} 4`,
		`serpent_billed_pages_total{source="charged_no_result"} 1`,
		`serpent_suspected_double_charges 0`,
		fmt.Sprintf(`serpent_metrics_log_seq %d`, n),
		`serpent_metrics_caught_up 1`,
		fmt.Sprintf(`serpent_metrics_jobs_held %d`, len(jobs)), // this tally keeps every job
		`serpent_projection_lag_up 0`,
		`serpent_api_request_seconds_count{account="default",status="200"} 1`,
		`serpent_api_request_seconds_count{account="team-b",status="unknown"} 1`,
		fmt.Sprintf(`serpent_append_seconds_count{result="ok"} %d`, len(jobs)),
		`serpent_append_seconds_count{result="conflict"} 1`,
		`serpent_group_commit_appends_count`,
		`serpent_info{version="test",worker="w1"} 1`,
		`go_goroutines`,
	} {
		require.Contains(t, body, want)
	}
	require.True(t, strings.Contains(body, "serpent_key_rotations_total{reason="), "rotations are listed by reason")
	require.NotContains(t, body, "serpent_projection_lag_events")
}

// TestScrapeShowsTheLag: the projections' lag, read at scrape time.
func TestScrapeShowsTheLag(t *testing.T) {
	lag := func(context.Context) (metrics.Lag, error) {
		return metrics.Lag{Pending: 12, Behind: 1500 * time.Millisecond}, nil
	}
	last := func(context.Context) (uint64, error) { return 40, nil }
	body := scrape(t, metrics.New(metrics.Options{Lag: lag, LastSeq: last}))
	for _, want := range []string{"serpent_projection_lag_up 1\n", "serpent_projection_lag_events 12\n",
		"serpent_projection_lag_seconds 1.5\n", "serpent_event_log_last_seq 40\n", "serpent_projection_catching_up 0\n",
		"serpent_projection_catchup_events_per_second 0\n", "serpent_projection_catchup_remaining_seconds 0\n"} {
		require.Contains(t, body, want)
	}
}

// TestScrapeShowsACatchUp: while this process's projection runner
// catches up, its rate and the time it has left.
func TestScrapeShowsACatchUp(t *testing.T) {
	lag := func(context.Context) (metrics.Lag, error) {
		return metrics.Lag{Pending: 600_000, Behind: time.Hour, CatchingUp: true, CatchUpRate: 95_000, CatchUpLeft: 6300 * time.Millisecond}, nil
	}
	body := scrape(t, metrics.New(metrics.Options{Lag: lag}))
	for _, want := range []string{"serpent_projection_lag_events 600000\n", "serpent_projection_catching_up 1\n",
		"serpent_projection_catchup_events_per_second 95000\n", "serpent_projection_catchup_remaining_seconds 6.3\n"} {
		require.Contains(t, body, want)
	}
}

// sample finds one sample of a /metrics body: its value, and whether it
// is there.
func sample(body, name string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, name+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// TestScrapeWaitsForTheTallyToCatchUp: a restarted process folds the log
// again from its start. Until it has counted the log as it stood when it
// began, /metrics leaves every figure folded from the log out, and says
// so (serpent_metrics_caught_up 0, with how far it has read): a partial
// serpent_purchases_total, lower than the last process served, would be
// a counter reset to Prometheus, and increase() would count the whole
// replay as new purchases. A scrape after each event of the replay has
// the whole count or none of it.
func TestScrapeWaitsForTheTallyToCatchUp(t *testing.T) {
	ids := projectionstest.IDsFrom(0)
	bought := func(name string) []projections.Record {
		j := projectionstest.NewJob(t, ids, name, projectionstest.T0)
		j.Send()
		req := "req_" + name
		j.Reply(aggregate.Outcome{Status: 200, RequestID: req, Result: projectionstest.Result(req, 1), Pages: 1})
		var recs []projections.Record
		for _, e := range j.Log {
			recs = append(recs, projections.Record{Event: e})
		}
		return recs
	}
	const jobs = 100
	var log []projections.Record
	for i := range jobs {
		log = append(log, bought(fmt.Sprintf("kettle %d", i))...)
	}
	for i := range log {
		log[i].Seq = uint64(i + 1)
	}

	// The restarted process serves /metrics before its fold has read
	// anything.
	tally := projections.NewTally().ForgetFinished()
	m := metrics.New(metrics.Options{Tally: tally})
	body := scrape(t, m)
	caught, ok := sample(body, "serpent_metrics_caught_up")
	require.True(t, ok, "serpent_metrics_caught_up is served:\n%s", body)
	require.Zero(t, caught)
	seq, _ := sample(body, "serpent_metrics_log_seq")
	require.Zero(t, seq)
	for _, name := range []string{"serpent_purchases_total", "serpent_suspected_double_charges", "serpent_undecodable_events_total", "serpent_metrics_jobs_held"} {
		_, ok := sample(body, name)
		require.False(t, ok, "%s is left out until the fold has caught up", name)
	}
	require.NotContains(t, body, "serpent_jobs{")
	require.NotContains(t, body, "serpent_sends_total{")

	tally.CatchUpTo(uint64(len(log))) // where the log ended when its reader began
	for i, r := range log {
		tally.Apply(r)
		body := scrape(t, m)
		purchases, counted := sample(body, "serpent_purchases_total")
		caught, _ := sample(body, "serpent_metrics_caught_up")
		if last := i == len(log)-1; !last {
			require.Zero(t, caught, "event %d", r.Seq)
			require.False(t, counted, "serpent_purchases_total %v served while still counting", purchases)
			continue
		}
		require.EqualValues(t, 1, caught)
		require.EqualValues(t, jobs, purchases)
	}

	// Caught up, it stays so, and counts what comes next.
	for i, r := range bought("grinder") {
		r.Seq = uint64(len(log) + 1 + i)
		tally.Apply(r)
	}
	body = scrape(t, m)
	purchases, _ := sample(body, "serpent_purchases_total")
	require.EqualValues(t, jobs+1, purchases)
	caught, _ = sample(body, "serpent_metrics_caught_up")
	require.EqualValues(t, 1, caught)
}

// TestScrapeOfAnEmptyLog: a tally of an empty log is caught up at once:
// its figures are served, at 0.
func TestScrapeOfAnEmptyLog(t *testing.T) {
	tally := projections.NewTally().ForgetFinished()
	tally.CatchUpTo(0)
	body := scrape(t, metrics.New(metrics.Options{Tally: tally}))
	require.Contains(t, body, "serpent_metrics_caught_up 1")
	require.Contains(t, body, "serpent_purchases_total 0")
}
