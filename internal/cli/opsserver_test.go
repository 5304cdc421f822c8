package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// opsURL is the base URL of the engine's HTTP server, from what it printed.
func (r *engineRun) opsURL(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`status page on (http://\S+)/ `).FindStringSubmatch(r.stdout.String())
	require.NotNil(t, m, "serpent run did not print its status page:\n%s", r.stdout)
	return m[1]
}

// get fetches a URL and returns its status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// metricValue finds one sample of a /metrics body, -1 if it is not there.
func metricValue(body, sample string) float64 {
	for _, line := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

// terminalJobs counts the finished jobs /metrics reports.
func terminalJobs(body string) int {
	n := 0
	for _, s := range []string{"succeeded", "failed", "charged_no_result", "cancelled"} {
		n += max(int(metricValue(body, fmt.Sprintf(`serpent_jobs{state=%q}`, s))), 0)
	}
	return n
}

// publishJobs publishes n distinct schedule commands for slots now and
// returns their payloads.
func publishJobs(t *testing.T, js jetstream.JetStream, prefix string, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		p := fmt.Sprintf(`{"slot":"2026-12-02T14:%02d:00Z","query":"%s %d","country":"US","language":"en","device":"mobile"}`, i%60, prefix, i)
		_, err := js.Publish(context.Background(), snats.ScheduleSubject, []byte(p))
		require.NoError(t, err)
		out = append(out, p)
	}
	return out
}

// waitFinished waits until /metrics counts n finished jobs.
func waitFinished(t *testing.T, base string, n int) string {
	t.Helper()
	var body string
	natstest.WaitFor(t, time.Minute, func() error {
		_, body = get(t, base+"/metrics")
		if got := terminalJobs(body); got < n {
			return fmt.Errorf("%d of %d jobs finished", got, n)
		}
		return nil
	})
	return body
}

// TestOpsEndpoints: /metrics counts what the engine did, /healthz and
// /readyz answer, and readiness fails with a clear reason when the
// projections lag more than allowed.
func TestOpsEndpoints(t *testing.T) {
	r := startEngine(t, nil, "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0", "--log-level", "warn")
	base := r.opsURL(t)
	_, js := natstest.Connect(t, r.natsURL)
	require.NoError(t, engine.SetLimits(context.Background(), accountsKV(t, js), "default", accounts.Limits{MaxInFlight: 3, DailyPages: 1000}))
	publishJobs(t, js, "ops", 5)
	body := waitFinished(t, base, 5)

	require.Equal(t, 5.0, metricValue(body, `serpent_jobs{state="succeeded"}`))
	require.Equal(t, 5.0, metricValue(body, `serpent_sends_total{class="success"}`))
	require.Equal(t, 5.0, metricValue(body, `serpent_purchases_total`))
	require.Equal(t, 0.0, metricValue(body, `serpent_suspected_double_charges`))
	require.Equal(t, 0.0, metricValue(body, `serpent_metrics_jobs_held`), "finished jobs are counted and let go")
	require.Greater(t, metricValue(body, `serpent_billed_pages_total{source="observation"}`), 0.0)
	require.Equal(t, 5.0, metricValue(body, `serpent_api_request_seconds_count{account="default",status="200"}`))
	require.Greater(t, metricValue(body, `serpent_append_seconds_count{result="ok"}`), 0.0)
	require.Greater(t, metricValue(body, `serpent_group_commit_events_count`), 0.0)
	require.Equal(t, 1.0, metricValue(body, `serpent_projection_lag_up`))
	// The account's spend and limits, as every worker shares them.
	require.Equal(t, 1.0, metricValue(body, `serpent_accounts_up`))
	require.Equal(t, 1000.0, metricValue(body, `serpent_account_budget_pages{account="default"}`))
	require.Equal(t, 3.0, metricValue(body, `serpent_account_max_in_flight{account="default"}`))
	require.Equal(t, 5.0, metricValue(body, `serpent_account_spent_pages{account="default"}`), "one page per search")
	require.Equal(t, 0.0, metricValue(body, `serpent_account_in_flight{account="default"}`))
	require.Equal(t, 0.0, metricValue(body, `serpent_account_paused{account="default"}`))
	require.GreaterOrEqual(t, metricValue(body, `serpent_account_waiting_jobs{account="default",reason="in_flight"}`), 0.0)

	code, health := get(t, base+"/healthz")
	require.Equal(t, 200, code)
	require.Equal(t, "ok\n", health)
	natstest.WaitFor(t, 20*time.Second, func() error {
		code, ready := get(t, base+"/readyz")
		if code != 200 {
			return fmt.Errorf("readyz %d:\n%s", code, ready)
		}
		for _, want := range []string{"ok   nats connected", "ok   stream SERP_EVENTS", "ok   bucket serp_status",
			"ok   bucket serp_accounts", "ok   projection lag"} {
			require.Contains(t, ready, want)
		}
		return nil
	})
	require.Contains(t, body, `serpent_info{version="dev",worker="`)
	require.NotContains(t, body, `worker=""`, "the engine's name")

	// Without serp_accounts no search can take its slot: not ready.
	require.NoError(t, js.DeleteKeyValue(context.Background(), snats.AccountsBucket))
	natstest.WaitFor(t, 20*time.Second, func() error {
		code, ready := get(t, base+"/readyz")
		if code != 503 || !strings.Contains(ready, "FAIL bucket serp_accounts") {
			return fmt.Errorf("readyz %d:\n%s", code, ready)
		}
		return nil
	})
}

// engineStreams makes the streams serpent run makes: the event log, its
// archive, and the command, rejection and work streams.
func engineStreams(t *testing.T, srv *natstest.Server) {
	t.Helper()
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	_, err = snats.EnsureArchiveStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{}, time.Second))
}

// TestReadyzReportsLag: with the projection buckets made but no runner
// applying, one event more than --ready-max-lag 0 fails readiness, and
// /readyz says why.
func TestReadyzReportsLag(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	engineStreams(t, srv)
	_, err := projector.New(ctx, srv.JS, projector.Config{})
	require.NoError(t, err)
	mx, tally := newEngineMetrics(srv.JS, "w", time.Now, nil)
	ops := &opsServer{nc: srv.Conn, js: srv.JS, projections: true, ops: opsFlags{readyMaxLag: 0, readyMaxBehind: time.Hour}, metrics: mx, tally: tally}
	lines, ok := ops.readiness(ctx)
	require.True(t, ok, "nothing to apply yet: %v", lines)

	_, err = srv.JS.Publish(ctx, snats.EventSubjectPrefix+"0123456789abcdef0123456789abcdef", []byte(`{}`))
	require.NoError(t, err)
	// The server counts a consumer's pending messages as the stream
	// signals it, a moment after the publish is acknowledged.
	rec := waitUnready(t, ops)
	require.Contains(t, rec.Body.String(), "FAIL projection lag 1 events: 1 events to apply, more than --ready-max-lag 0")
	require.Contains(t, rec.Body.String(), "ok   stream SERP_WORK")
}

// TestReadyzFailsWhileTheArchiveCannotCopy: /readyz fails while
// SERP_ARCHIVE reports an error copying SERP_EVENTS (here, after
// SERP_EVENTS was deleted under it), and the metrics say so too.
func TestReadyzFailsWhileTheArchiveCannotCopy(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	engineStreams(t, srv)
	mx, tally := newEngineMetrics(srv.JS, "w", time.Now, nil)
	ops := &opsServer{nc: srv.Conn, js: srv.JS, ops: opsFlags{readyMaxLag: 5000, readyMaxBehind: time.Hour}, metrics: mx, tally: tally}
	lines, ok := ops.readiness(ctx)
	require.True(t, ok, "%v", lines)
	require.Contains(t, lines, "ok   stream SERP_ARCHIVE")

	require.NoError(t, srv.JS.DeleteStream(ctx, snats.EventStream))
	rec := waitUnready(t, ops)
	natstest.WaitFor(t, 10*time.Second, func() error {
		rec = httptest.NewRecorder()
		ops.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		if !strings.Contains(rec.Body.String(), "FAIL stream SERP_ARCHIVE: nats: SERP_ARCHIVE cannot copy SERP_EVENTS") {
			return fmt.Errorf("/readyz: %s", rec.Body)
		}
		return nil
	})
	rec = httptest.NewRecorder()
	ops.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Contains(t, rec.Body.String(), "serpent_archive_ok 0")
}

// readyzWithOneApplied is an ops server whose projections (made, but
// with no runner) have applied the log's first event, and that event.
func readyzWithOneApplied(t *testing.T, srv *natstest.Server, maxBehind time.Duration) *opsServer {
	t.Helper()
	ctx := context.Background()
	engineStreams(t, srv)
	_, err := projector.New(ctx, srv.JS, projector.Config{})
	require.NoError(t, err)
	mx, tally := newEngineMetrics(srv.JS, "w", time.Now, nil)
	ops := &opsServer{nc: srv.Conn, js: srv.JS, projections: true,
		ops: opsFlags{readyMaxLag: 5000, readyMaxBehind: maxBehind}, metrics: mx, tally: tally}
	_, err = srv.JS.Publish(ctx, readyzSubject, []byte(`{}`))
	require.NoError(t, err)
	// Applied as the runner does: acknowledged on its consumer.
	cons, err := srv.JS.Consumer(ctx, snats.EventStream, projector.Consumer)
	require.NoError(t, err)
	batch, err := cons.Fetch(1)
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(ctx))
	}
	return ops
}

const readyzSubject = snats.EventSubjectPrefix + "0123456789abcdef0123456789abcdef"

// waitPending waits until the server counts one event to apply.
func waitPending(t *testing.T, srv *natstest.Server) {
	t.Helper()
	natstest.WaitFor(t, 10*time.Second, func() error {
		lag, err := projector.ReadLag(context.Background(), srv.JS, "", time.Now())
		if err != nil {
			return err
		}
		if lag.Pending != 1 {
			return fmt.Errorf("%d pending", lag.Pending)
		}
		return nil
	})
}

// TestReadyzAfterAQuietSpell: after a quiet spell longer than
// --ready-max-behind, the first new event, written a moment ago, does not
// make the engine unready: it has waited only that moment. (Measured as
// the time between the newest applied event and the newest event, it
// was as far behind as the spell was long, and /readyz answered 503 at
// the first event after every quiet spell.)
func TestReadyzAfterAQuietSpell(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	const maxBehind = time.Second
	ops := readyzWithOneApplied(t, srv, maxBehind)
	// The quiet spell, by the server's clock.
	natstest.WaitFor(t, 10*time.Second, func() error {
		lag, err := projector.ReadLag(ctx, srv.JS, "", time.Now())
		if err != nil {
			return err
		}
		if lag.Age <= maxBehind {
			return fmt.Errorf("quiet for %s", lag.Age)
		}
		return nil
	})
	before := time.Now()
	_, err := srv.JS.Publish(ctx, readyzSubject, []byte(`{}`))
	require.NoError(t, err)
	waitPending(t, srv)
	lines, ok := ops.readiness(ctx)
	// The event has waited no longer than since just before its write:
	// under --ready-max-behind unless this machine stalled for as long.
	if time.Since(before) < maxBehind {
		require.True(t, ok, "one event written a moment ago is pending: %v", lines)
	}
}

// TestReadyzFailsWhileAnEventWaitsUnapplied: with the projections
// standing still (no runner) and one event waiting, the log quiet, the
// engine becomes unready once that event has waited longer than
// --ready-max-behind, and /readyz says so. (Measured as the time between
// the newest applied event and the newest event, the wait stayed the
// moment between their two writes, and /readyz answered 200 for ever.)
func TestReadyzFailsWhileAnEventWaitsUnapplied(t *testing.T) {
	srv := natstest.RunServer(t)
	ops := readyzWithOneApplied(t, srv, 500*time.Millisecond)
	_, err := srv.JS.Publish(context.Background(), readyzSubject, []byte(`{}`))
	require.NoError(t, err)
	rec := waitUnready(t, ops)
	require.Contains(t, rec.Body.String(), "FAIL projection lag 1 events: the oldest event to apply has waited")
	require.Contains(t, rec.Body.String(), "more than --ready-max-behind 500ms")
}

// TestStatusPageWithoutProjections: with no projection runner anywhere
// there is no lag to read; the page still tells when its figures have
// counted the whole log, rather than saying for ever that they grow.
func TestStatusPageWithoutProjections(t *testing.T) {
	r := startEngine(t, nil, "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--projections=false", "--log-level", "warn")
	base := r.opsURL(t)
	_, js := natstest.Connect(t, r.natsURL)
	publishJobs(t, js, "noproj", 3)
	waitFinished(t, base, 3)
	natstest.WaitFor(t, 20*time.Second, func() error {
		_, page := get(t, base+"/")
		if strings.Contains(page, "Still counting") {
			return fmt.Errorf("the page still says it is counting")
		}
		return nil
	})
}

// TestEventLogLastSeqWithoutProjections: serpent_event_log_last_seq is
// read from the event stream itself, so an engine run with
// --projections=false (no projection consumer, no lag to read) still
// serves it, as the README's metrics table lists it.
func TestEventLogLastSeqWithoutProjections(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	for range 3 {
		_, err := srv.JS.Publish(ctx, snats.EventSubjectPrefix+"0123456789abcdef0123456789abcdef", []byte(`{}`))
		require.NoError(t, err)
	}
	mx, _ := newEngineMetrics(srv.JS, "w", time.Now, nil)
	rec := httptest.NewRecorder()
	mx.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	require.Equal(t, 0.0, metricValue(body, "serpent_projection_lag_up"), "no projections, no lag")
	require.Equal(t, 3.0, metricValue(body, "serpent_event_log_last_seq"))
}

// TestAccountFiguresByTheEnginesClock: the accounts' shared state (a
// search's slot until its lease ends, pauses, the spending day) is
// stamped by the server's clock, which the engine reads; the metrics and
// the status page read it by the same clock, not the machine's, so a
// machine whose clock is off does not count an ended slot as running.
func TestAccountFiguresByTheEnginesClock(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{}, time.Second))
	kv, err := srv.JS.KeyValue(ctx, snats.AccountsBucket)
	require.NoError(t, err)
	require.NoError(t, engine.SetLimits(ctx, accountsKV(t, srv.JS), "team-a", accounts.Limits{MaxInFlight: 2}))
	server := time.Now()
	_, err = kv.Put(ctx, "slot.team-a.0", []byte(`{"worker":"w","job":"j","until":"`+server.Add(time.Minute).Format(time.RFC3339Nano)+`"}`))
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		now  func() time.Time
		want float64
	}{
		"the lease runs":    {func() time.Time { return server }, 1},
		"the lease is over": {func() time.Time { return server.Add(time.Hour) }, 0},
	} {
		t.Run(name, func(t *testing.T) {
			mx, tally := newEngineMetrics(srv.JS, "w", tc.now, nil)
			ops := &opsServer{nc: srv.Conn, js: srv.JS, metrics: mx, tally: tally, now: tc.now}
			rec := httptest.NewRecorder()
			ops.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			require.Equal(t, tc.want, metricValue(rec.Body.String(), `serpent_account_in_flight{account="team-a"}`))
			rec = httptest.NewRecorder()
			ops.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			require.Contains(t, rec.Body.String(), fmt.Sprintf("<td>%d of 2</td>", int(tc.want)), "the status page's in flight")
		})
	}
}

// waitUnready waits until ops's /readyz answers 503, and returns that
// answer.
func waitUnready(t *testing.T, ops *opsServer) *httptest.ResponseRecorder {
	t.Helper()
	var rec *httptest.ResponseRecorder
	natstest.WaitFor(t, 10*time.Second, func() error {
		rec = httptest.NewRecorder()
		ops.handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		if rec.Code != http.StatusServiceUnavailable {
			return fmt.Errorf("/readyz %d: %s", rec.Code, rec.Body)
		}
		return nil
	})
	return rec
}

// TestMetricsResumeFromTheCheckpoint: an engine that stops leaves where
// its count of the log stands in serp_metrics, and the next one resumes
// from there with the same totals instead of counting the log again.
func TestMetricsResumeFromTheCheckpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--data", dir, "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}
	first := startEngine(t, nil, append(args, "--log-level", "warn")...)
	_, js := natstest.Connect(t, first.natsURL)
	publishJobs(t, js, "checkpoint", 5)
	waitFinished(t, first.opsURL(t), 5)
	last, err := eventLogLastSeq(t.Context(), js)
	require.NoError(t, err)
	first.stop(t)

	second := startEngine(t, nil, append(args, "--log-level", "debug")...)
	body := waitFinished(t, second.opsURL(t), 5)
	require.Equal(t, 5.0, metricValue(body, `serpent_jobs{state="succeeded"}`))
	require.Equal(t, 5.0, metricValue(body, `serpent_purchases_total`))
	require.Contains(t, second.stderr.String(), "counting the event log from its checkpoint")
	require.Contains(t, second.stderr.String(), fmt.Sprintf("seq=%d", last))
}

// TestSweepLooksAtTheJobsInFlight: an engine sweeps for lost timers
// among the jobs the metrics' fold of the log says are in flight only, not
// every job of the log, and repairs a lost one, whether it serves HTTP
// (and so shows that fold, and counts its sweeps) or not.
func TestSweepLooksAtTheJobsInFlight(t *testing.T) {
	t.Parallel()
	for name, http := range map[string]string{"with HTTP": "127.0.0.1:0", "without HTTP": ""} {
		t.Run(name, func(t *testing.T) {
			r := startEngine(t, nil, "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", http,
				"--log-level", "warn", "--sweep-every", "100ms")
			_, js := natstest.Connect(t, r.natsURL)
			publishJobs(t, js, "finished", 3)
			waitAllTerminal(t, js, waitJobsInLog(t, js, 3))

			job := loseATimer(t, js)
			waitAllTerminal(t, js, []string{job})
			require.Regexp(t, `sweep re-armed lost timers.* jobs=1 live=1 rearmed=1`, r.stderr.String())
			if http != "" {
				_, body := get(t, r.opsURL(t)+"/metrics")
				require.Equal(t, 1.0, metricValue(body, `serpent_sweep_rearmed_total{timer="job"}`))
				require.GreaterOrEqual(t, metricValue(body, `serpent_sweeps_total{outcome="swept"}`), 2.0, "at start and after")
			}
		})
	}
}

// TestSweepAtStartWithoutHTTP: an engine that neither serves HTTP nor
// sweeps after its start still sweeps the jobs in flight at start,
// folding the log for them, and then stops folding it.
func TestSweepAtStartWithoutHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--data", dir, "--nats-listen", "127.0.0.1:0", "--http", "", "--log-level", "warn", "--sweep-every", "0"}
	first := startEngine(t, nil, args...)
	_, js := natstest.Connect(t, first.natsURL)
	publishJobs(t, js, "finished", 3)
	waitAllTerminal(t, js, waitJobsInLog(t, js, 3))
	job := loseATimer(t, js)
	before, err := eventLogLastSeq(t.Context(), js)
	require.NoError(t, err)
	first.stop(t)
	// Its one sweep may have come while the intake still held a job's
	// command (and so armed a timer it did not need); never the lost one.
	require.NotRegexp(t, "arming it again[^\n]*job="+job, first.stderr.String())

	second := startEngine(t, nil, args...)
	_, js = natstest.Connect(t, second.natsURL)
	waitAllTerminal(t, js, []string{job})
	require.Regexp(t, `sweep re-armed lost timers.* jobs=1 live=1 rearmed=1`, second.stderr.String())

	// The fold stopped after the sweep, leaving its checkpoint of the log
	// as it read it then: before the jobs that came after.
	publishJobs(t, js, "after", 2)
	waitAllTerminal(t, js, waitJobsInLog(t, js, 6))
	last, err := eventLogLastSeq(t.Context(), js)
	require.NoError(t, err)
	kv, err := js.KeyValue(t.Context(), snats.MetricsBucket)
	require.NoError(t, err)
	e, err := kv.Get(t.Context(), snats.MetricsCheckpointKey)
	require.NoError(t, err, "no checkpoint; the engine said:\n%s", second.stderr)
	var head struct {
		Seq uint64 `json:"seq"`
	}
	require.NoError(t, json.Unmarshal(e.Value(), &head))
	require.GreaterOrEqual(t, head.Seq, before)
	require.Less(t, head.Seq, last)
}

// loseATimer schedules a job a few seconds ahead, waits for its timer,
// deletes it, and returns the job's id: only a sweep can wake it now.
func loseATimer(t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	// The jobs there before: a sweep may have armed a timer for one of
	// them (at the end of the lease of a job it found claimed).
	before := map[string]bool{}
	require.NoError(t, snats.EachSubject(t.Context(), js, snats.EventStream, snats.EventSubjectPrefix+">", func(s string) {
		before[strings.TrimPrefix(s, snats.EventSubjectPrefix)] = true
	}))
	slot := time.Now().Add(3 * time.Second).UTC().Truncate(time.Second).Add(time.Second)
	cmd := fmt.Sprintf(`{"slot":%q,"query":"lost timer","country":"US","language":"en","device":"mobile"}`, slot.Format(time.RFC3339))
	_, err := js.Publish(t.Context(), snats.ScheduleSubject, []byte(cmd))
	require.NoError(t, err)
	work, err := js.Stream(t.Context(), snats.WorkStream)
	require.NoError(t, err)
	var job string
	natstest.WaitFor(t, 10*time.Second, func() error {
		err := snats.EachSubject(t.Context(), js, snats.WorkStream, snats.TimerSubjectPrefix+">", func(s string) {
			if id := strings.TrimPrefix(s, snats.TimerSubjectPrefix); !before[id] {
				job = id
			}
		})
		if err == nil && job == "" {
			err = errors.New("no timer of the new job yet")
		}
		return err
	})
	require.NoError(t, work.Purge(t.Context(), jetstream.WithPurgeSubject(snats.TimerSubjectPrefix+job)))
	return job
}

// waitJobsInLog waits until the event log holds n jobs and returns their
// ids.
func waitJobsInLog(t *testing.T, js jetstream.JetStream, n int) []string {
	t.Helper()
	st, err := js.Stream(t.Context(), snats.EventStream)
	require.NoError(t, err)
	var ids []string
	natstest.WaitFor(t, time.Minute, func() error {
		info, err := st.Info(t.Context(), jetstream.WithSubjectFilter(snats.EventSubjectPrefix+">"))
		if err != nil {
			return err
		}
		ids = ids[:0]
		for subj := range info.State.Subjects {
			ids = append(ids, strings.TrimPrefix(subj, snats.EventSubjectPrefix))
		}
		if len(ids) < n {
			return fmt.Errorf("%d of %d jobs in the log", len(ids), n)
		}
		return nil
	})
	return ids
}

// TestDoubleChargesShownLive: the API loses the records of billed keys
// and runs their resends again. The engine finds each double charge in
// the billing ledger once the key's searches have ended, and shows it on
// /metrics, on the status page and in serpent status.
func TestDoubleChargesShownLive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sandbox.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"seed":3,"faults":{"dropAfterSearch":0.5,"lostRecord":1}}`), 0o644))
	r := startEngine(t, nil, "--data", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0",
		"--log-level", "error", "--sandbox-config", cfg, "--client-timeout", "2s", "--lease", "12s",
		"--base-delay", "20ms", "--max-delay", "200ms")
	base := r.opsURL(t)
	_, js := natstest.Connect(t, r.natsURL)
	publishJobs(t, js, "doubled", 6)
	var body string
	natstest.WaitFor(t, time.Minute, func() error {
		_, body = get(t, base+"/metrics")
		if n := metricValue(body, `serpent_charge_checks_total{verdict="double_charge"}`); n < 1 {
			return fmt.Errorf("%v double charges found", n)
		}
		return nil
	})
	require.Equal(t, 0.0, metricValue(body, `serpent_suspected_double_charges`), "serpent bought nothing twice")
	require.GreaterOrEqual(t, metricValue(body, `serpent_api_double_charges_total`), 1.0)

	_, page := get(t, base+"/")
	m := regexp.MustCompile(`id="doubled">\s*<tr><th>job</th></tr>\s*<tr><td><code>([0-9a-f]{32})</code>`).FindStringSubmatch(page)
	require.NotNil(t, m, "the status page lists the jobs:\n%s", page)
	natstest.WaitFor(t, 20*time.Second, func() error { // serp_status follows the log
		out, err := cli(t, r.natsURL, "status", m[1])
		if err == nil && !strings.Contains(out, "DOUBLE CHARGE: the API charged the key") {
			err = fmt.Errorf("serpent status shows no double charge yet:\n%s", out)
		}
		return err
	})
}

// TestReadyzWhileCatchingUp: while the engine's projection runner
// catches up with a log it trails by more than a batch, /readyz fails and
// says how far it has got; once it has caught up, it passes.
func TestReadyzWhileCatchingUp(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	engineStreams(t, srv)
	st, err := snats.NewEventStore(ctx, srv.JS, snats.EventStoreOptions{})
	require.NoError(t, err)
	ids := projectionstest.IDsFrom(0)
	const jobs = 40 // a message each: four batches of ten
	for i := range jobs {
		j := projectionstest.NewJob(t, ids, fmt.Sprintf("catch-up %d", i), projectionstest.T0)
		j.Send()
		_, err := st.Append(ctx, j.Log[0].JobID, 0, j.Log...)
		require.NoError(t, err)
	}

	written, release := make(chan struct{}), make(chan struct{})
	calls := 0
	hook := func(uint64) error {
		if calls++; calls == 2 { // the first full batch is tracked by now
			close(written)
			<-release
		}
		return nil
	}
	r, err := projector.New(ctx, srv.JS, projector.Config{Batch: 10, WriteClaims: true, LeaseTTL: time.Second, Hooks: projector.Hooks{AfterWrite: hook}})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	mx, tally := newEngineMetrics(srv.JS, "w", time.Now, r)
	ops := &opsServer{nc: srv.Conn, js: srv.JS, projections: true, ops: opsFlags{readyMaxLag: 5000, readyMaxBehind: time.Hour},
		metrics: mx, tally: tally, runner: r}
	select {
	case <-written:
	case <-time.After(time.Minute):
		t.Fatal("the runner wrote no second batch")
	}
	lines, ok := ops.readiness(ctx)
	close(release)
	require.False(t, ok, "catching up: %v", lines)
	require.Contains(t, strings.Join(lines, "\n"), "FAIL projection lag 30 events: catching up: 10 of 40 events applied (25%), ")

	natstest.WaitFor(t, time.Minute, func() error {
		if lines, ok := ops.readiness(ctx); !ok {
			return fmt.Errorf("not ready: %v", lines)
		}
		return nil
	})
}
