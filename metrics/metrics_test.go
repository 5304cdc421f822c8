package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/metrics"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections/projectionstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/store/group"
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
	srv := natstest.RunServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	st, err := snats.NewEventStore(ctx, srv.JS, snats.EventStoreOptions{})
	require.NoError(t, err)

	lag := func(ctx context.Context) (projector.Lag, error) {
		return projector.ReadLag(ctx, srv.JS, "", time.Now())
	}
	tally := metrics.NewTally()
	m := metrics.New(metrics.Options{Tally: tally, Lag: lag, Worker: "w1", Version: "test"})
	c := group.New(st, group.Options{OnCommit: m.Committed})
	defer c.Close()
	store := m.TimeAppends(c)

	jobs, _ := sampleRecords(t)
	n := 0
	for _, j := range jobs {
		_, err := store.Append(ctx, j[0].JobID, 0, j...)
		require.NoError(t, err)
		n += len(j)
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
		if got := tally.Seq(); got != uint64(n) {
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
