package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/eventstore/group"
	"github.com/serpent-engine/serpent/metrics"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
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

// TestFollowAndScrape: the sample log written to a real SERP_EVENTS is
// counted by Follow, and a scrape shows it with the lag and the timings
// the hooks were given.
func TestFollowAndScrape(t *testing.T) {
	srv, st := eventLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error

	lag := func(ctx context.Context) (projector.Lag, error) {
		return projector.ReadLag(ctx, srv.JS, "", time.Now())
	}
	tally := projections.NewTally()
	m := metrics.New(metrics.Options{Tally: tally, Lag: lag, Worker: "w1", Version: "test"})
	c := group.New(st, group.Options{OnCommit: m.Committed})
	defer c.Close()
	store := m.TimeAppends(c)

	jobs, _ := sampleRecords(t)
	var n uint64 // the log's last sequence
	for _, j := range jobs {
		v, err := store.Append(ctx, j[0].JobID, 0, j...)
		require.NoError(t, err)
		n = max(n, v)
	}
	stale := jobs[0][1]
	stale.ID = projectionstest.IDsFrom(1000).EventID()
	_, err = store.Append(ctx, stale.JobID, 0, stale)
	require.Error(t, err, "a stale append is a conflict")
	m.Searched("", serper.Result{Confirmed: true, Status: 200, Latency: 120 * time.Millisecond})
	m.Searched("team-b", serper.Result{Unknown: serper.UnknownTimeout, Latency: 100 * time.Second})

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); metrics.Follow(ctx, srv.JS, tally, nil) }()
	defer wg.Wait()
	defer cancel()
	natstest.WaitFor(t, 10*time.Second, func() error {
		if got := tally.Seq(); got != n {
			return fmt.Errorf("counted up to %d of %d", got, n)
		}
		return nil
	})

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
		fmt.Sprintf(`serpent_metrics_jobs_held %d`, len(jobs)), // this tally keeps every job
		`serpent_projection_lag_up 0`,                          // no projection runner here
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

// TestScrapeWaitsForTheFoldToCatchUp: a restarted process folds the log
// again from its start. Until it has counted the log as it stood when it
// began, /metrics leaves every figure folded from the log out, and says
// so (serpent_metrics_caught_up 0, with how far it has read): a partial
// serpent_purchases_total, lower than the last process served, would be
// a counter reset to Prometheus, and increase() would count the whole
// replay as new purchases.
func TestScrapeWaitsForTheFoldToCatchUp(t *testing.T) {
	srv, st := eventLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ids := projectionstest.IDsFrom(0)
	bought := func(name string) {
		j := projectionstest.NewJob(t, ids, name, projectionstest.T0)
		j.Send()
		req := "req_" + name
		j.Reply(aggregate.Outcome{Status: 200, RequestID: req, Result: projectionstest.Result(req, 1), Pages: 1})
		_, err := st.Append(ctx, j.S.JobID, 0, j.Log...)
		require.NoError(t, err)
	}
	const jobs = 100
	for i := range jobs {
		bought(fmt.Sprintf("kettle %d", i))
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

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); metrics.Follow(ctx, srv.JS, tally, nil) }()
	defer wg.Wait()
	defer cancel()
	// Every scrape during the replay has the whole count or none of it.
	natstest.WaitFor(t, 10*time.Second, func() error {
		body := scrape(t, m)
		purchases, counted := sample(body, "serpent_purchases_total")
		caught, _ := sample(body, "serpent_metrics_caught_up")
		switch {
		case caught == 0 && counted:
			t.Fatalf("serpent_purchases_total %v served while still counting", purchases)
		case caught == 0:
			return fmt.Errorf("still counting")
		case purchases != jobs:
			t.Fatalf("caught up with serpent_purchases_total %v of %d", purchases, jobs)
		}
		return nil
	})

	// Caught up, it stays so, and counts what comes next.
	bought("grinder")
	natstest.WaitFor(t, 10*time.Second, func() error {
		body := scrape(t, m)
		if v, _ := sample(body, "serpent_purchases_total"); v != jobs+1 {
			return fmt.Errorf("serpent_purchases_total %v", v)
		}
		if v, _ := sample(body, "serpent_metrics_caught_up"); v != 1 {
			return fmt.Errorf("serpent_metrics_caught_up %v", v)
		}
		return nil
	})
}

// TestFollowOfAnEmptyLogIsCaughtUp: on an empty log there is nothing to
// count before the figures are whole: they are served at once, at 0.
func TestFollowOfAnEmptyLogIsCaughtUp(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	tally := projections.NewTally().ForgetFinished()
	m := metrics.New(metrics.Options{Tally: tally})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); metrics.Follow(ctx, srv.JS, tally, nil) }()
	defer wg.Wait()
	defer cancel()
	natstest.WaitFor(t, 10*time.Second, func() error {
		if !tally.Counts().CaughtUp {
			return fmt.Errorf("not caught up")
		}
		return nil
	})
	body := scrape(t, m)
	require.Contains(t, body, "serpent_metrics_caught_up 1")
	require.Contains(t, body, "serpent_purchases_total 0")
}

// TestFollowCatchesUpWhenTheLogsEndIsDeleted: the log's last message
// deleted after Follow noted where the log ended is never delivered;
// the message before it, with nothing pending after it, is the end. (The
// engine's SERP_EVENTS denies deletes; an operator's copy of it, or a
// purge, may not.)
func TestFollowCatchesUpWhenTheLogsEndIsDeleted(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{Name: snats.EventStream, Subjects: []string{snats.EventSubjectPrefix + ">"}})
	require.NoError(t, err)
	for range 3 {
		_, err := srv.JS.Publish(ctx, snats.EventSubjectPrefix+"0123456789abcdef0123456789abcdef", []byte(`not an event`))
		require.NoError(t, err)
	}
	tally := projections.NewTally()
	tally.CatchUpTo(3) // what Follow notes when it starts
	require.NoError(t, stream.DeleteMsg(ctx, 3))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); metrics.Follow(ctx, srv.JS, tally, nil) }()
	defer wg.Wait()
	defer cancel()
	natstest.WaitFor(t, 10*time.Second, func() error {
		if c := tally.Counts(); !c.CaughtUp {
			return fmt.Errorf("not caught up at %d", c.Seq)
		}
		return nil
	})
	require.EqualValues(t, 2, tally.Counts().Undecodable)
}
