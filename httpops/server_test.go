package httpops_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/httpops"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// source is a Source of fixed answers; a nil error map entry is "there".
type source struct {
	down     bool
	missing  map[string]error // streams and buckets that are not there
	lag      httpops.Lag
	lagErr   error
	last     uint64
	jobs     map[string]projections.JobView
	jobsErr  error
	days     map[string]projections.DayLedger
	unread   []string
	daysErr  error
	accounts []httpops.Account
	acctsErr error
	// accountsAt is the time the accounts were last read at.
	accountsAt time.Time
}

func (s *source) Connection() (bool, string) {
	if s.down {
		return false, "CLOSED"
	}
	return true, "CONNECTED"
}
func (s *source) Stream(_ context.Context, name string) error { return s.missing[name] }
func (s *source) Bucket(_ context.Context, name string) error { return s.missing[name] }
func (s *source) Lag(context.Context, time.Time) (httpops.Lag, error) {
	return s.lag, s.lagErr
}
func (s *source) LastSeq(context.Context) (uint64, error) { return s.last, nil }
func (s *source) Jobs(_ context.Context, ids []string) ([]projections.JobView, error) {
	var out []projections.JobView
	for _, id := range ids {
		if v, ok := s.jobs[id]; ok {
			out = append(out, v)
		}
	}
	return out, s.jobsErr
}
func (s *source) DayLedgers(context.Context, []string) (map[string]projections.DayLedger, []string, error) {
	return s.days, s.unread, s.daysErr
}
func (s *source) Accounts(_ context.Context, now time.Time) ([]httpops.Account, error) {
	s.accountsAt = now
	return s.accounts, s.acctsErr
}

// serve answers one GET of path.
func serve(t *testing.T, srv *httpops.Server, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

func TestHealthz(t *testing.T) {
	src := &source{}
	srv := httpops.New(httpops.Config{Source: src, Tally: projections.NewTally()})
	code, body := serve(t, srv, "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	src.down = true
	code, body = serve(t, srv, "/healthz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "nats: CLOSED\n", body)
}

// TestReadyz: one line per check; a missing bucket, an account whose
// purchases are held, or projections further behind than allowed fail
// it; limits refused whose earlier ones hold only warn.
func TestReadyz(t *testing.T) {
	src := &source{missing: map[string]error{}}
	var refusals []httpops.Refusal
	cfg := httpops.Config{Source: src, Tally: projections.NewTally(), Streams: []string{"SERP_EVENTS", "SERP_WORK"},
		Buckets: []string{"serp_accounts", "serp_status"}, Projections: true, ReadyMaxLag: 10, ReadyMaxBehind: time.Minute,
		Refusals: func() []httpops.Refusal { return refusals }}
	srv := httpops.New(cfg)
	code, body := serve(t, srv, "/readyz")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "ok   nats connected\nok   stream SERP_EVENTS\nok   stream SERP_WORK\nok   bucket serp_accounts\nok   bucket serp_status\nok   projection lag 0 events\n", body)

	tests := []struct {
		name string
		edit func()
		want string
	}{
		{"a bucket missing", func() { src.missing["serp_accounts"] = errors.New("bucket not found") },
			"FAIL bucket serp_accounts: bucket not found"},
		{"too many events to apply", func() { src.lag = httpops.Lag{Pending: 11} },
			"FAIL projection lag 11 events: 11 events to apply, more than --ready-max-lag 10"},
		{"an event waiting too long", func() { src.lag = httpops.Lag{Pending: 1, Behind: 61 * time.Second} },
			"FAIL projection lag 1 events: the oldest event to apply has waited 1m1s, more than --ready-max-behind 1m0s"},
		{"the lag unknown", func() { src.lagErr = errors.New("no consumer") }, "FAIL projection lag 0 events: no consumer"},
		{"catching up", func() {
			src.lag = httpops.Lag{Pending: 5, CatchUp: &httpops.CatchUp{Done: 400_000, Total: 1_000_000, Rate: 95_000, Left: 6300 * time.Millisecond}}
		}, "FAIL projection lag 5 events: catching up: 400000 of 1000000 events applied (40%), 95000 events/s, about 6s left"},
		{"an account's purchases held", func() {
			refusals = []httpops.Refusal{{Account: "team-b", Key: "limits.team-b", Err: errors.New("bad"), Held: true}}
		}, "FAIL account team-b limits: key limits.team-b of bucket serp_accounts is refused (bad): none were applied before"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src.missing, src.lag, src.lagErr, refusals = map[string]error{}, httpops.Lag{}, nil, nil
			tt.edit()
			code, body := serve(t, srv, "/readyz")
			require.Equal(t, http.StatusServiceUnavailable, code, body)
			require.Contains(t, body, tt.want)
		})
	}

	src.missing, src.lag, src.lagErr = map[string]error{}, httpops.Lag{}, nil
	refusals = []httpops.Refusal{{Account: "team-b", Key: "limits.team-b", Err: errors.New("bad")}}
	code, body = serve(t, srv, "/readyz")
	require.Equal(t, http.StatusOK, code, body)
	require.Contains(t, body, "warn account team-b limits: key limits.team-b of bucket serp_accounts is refused (bad): the limits applied before hold")

	src.down = true
	code, body = serve(t, srv, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "FAIL nats connected: connection is CLOSED\n", body)

	cfg.Projections = false
	src.down, src.lag = false, httpops.Lag{Pending: 1000}
	code, body = serve(t, httpops.New(cfg), "/readyz")
	require.Equal(t, http.StatusOK, code, "an engine without projections does not wait for them")
	require.NotContains(t, body, "projection lag")
}

// TestMetricsAreMounted: /metrics is the handler given.
func TestMetricsAreMounted(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "serpent_info 1") })
	code, body := serve(t, httpops.New(httpops.Config{Source: &source{}, Tally: projections.NewTally(), Metrics: metrics}), "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "serpent_info 1\n", body)
	code, _ = serve(t, httpops.New(httpops.Config{Source: &source{}, Tally: projections.NewTally(), Metrics: metrics}), "/nothing")
	require.Equal(t, http.StatusNotFound, code)
}

// TestStatusPage: the page shows the tally's jobs by state and double
// charges, the recent jobs with their attempts, the reconciliation
// queue, the chart of the last two weeks and the accounts, read by the
// engine's clock; what cannot be read is a note.
func TestStatusPage(t *testing.T) {
	now := projectionstest.T0.Add(36 * time.Hour)
	jobs := projectionstest.SampleLog(t)
	recs := projectionstest.Interleave(jobs)
	tally := projections.NewTally()
	for _, r := range recs {
		tally.Apply(r)
	}
	views := map[string]projections.JobView{}
	for _, j := range jobs {
		views[j[0].JobID] = projections.ViewOf(aggregate.Fold(j))
	}
	day := projectionstest.T0.UTC().Format(projections.DayLayout)
	paused := now.Add(time.Minute)
	src := &source{lag: httpops.Lag{Last: recs[len(recs)-1].Seq, Pending: 2, Behind: 1500 * time.Millisecond}, jobs: views,
		days: map[string]projections.DayLedger{day: {Day: day, Pages: 4, Searches: 4, EstSpendMicros: 4000}},
		accounts: []httpops.Account{{Account: "team-a", Limits: accounts.Limits{MaxInFlight: 4, DailyPages: 500},
			SpentToday: accounts.Spend{Pages: 3, Micros: 3000}, InFlight: 1, PausedUntil: &paused, PauseReason: "rate limited"}}}
	clock := func() time.Time { return now }
	srv := httpops.New(httpops.Config{Source: src, Tally: tally, Worker: "engine-a", Version: "test", Now: clock})

	code, page := serve(t, srv, "/")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, now, src.accountsAt, "the accounts are read by the engine's clock")
	for _, want := range []string{
		"worker <b>engine-a</b> · version test · NATS CONNECTED · projection lag 2 events, 1.5s behind",
		`<meta http-equiv="refresh" content="5">`,
		`data-state="succeeded"><div class="n">4</div>`,
		`data-state="total"><div class="n">6</div>`,
		`data-state="purchases"><div class="n">5</div>`,
		`<tr data-account="team-a">`, "3 pages, $0.003", "500 pages", "<td>1 of 4</td>", "rate limited",
		`<tr data-job="` + jobs[0][0].JobID + `">`, "first sent",
		"No job is waiting for the billing ledger.",
		`<title>` + day[5:] + `: 4 pages, $0.004 estimated</title>`,
	} {
		require.Contains(t, page, want)
	}
	require.NotContains(t, page, "Still counting")
	require.NotContains(t, page, "SANDBOX MODE", "no banner with the real API")
	require.Equal(t, len(jobs), strings.Count(page, `<tr data-job=`))

	src.lagErr, src.last = errors.New("no consumer"), recs[len(recs)-1].Seq+1
	src.jobsErr, src.daysErr, src.acctsErr = errors.New("no bucket"), errors.New("no bucket"), errors.New("no bucket")
	_, page = serve(t, srv, "/")
	for _, want := range []string{"projection lag unknown: no consumer", "Still counting the event log",
		"no job details: serp_status: no bucket", "no spend per day: serp_ledger: no bucket", "no API accounts: no bucket"} {
		require.Contains(t, page, want)
	}

	src.lagErr, src.daysErr, src.unread = nil, nil, []string{day}
	_, page = serve(t, srv, "/")
	require.Contains(t, page, "spend per day not read for "+day+": shown as nothing bought")

	srv = httpops.New(httpops.Config{Source: src, Tally: tally, Sandbox: "http://127.0.0.1:8790", Now: clock})
	_, page = serve(t, srv, "/")
	require.Contains(t, page, `<div class="sandbox" id="sandbox">SANDBOX MODE: searches go to the sandbox at http://127.0.0.1:8790 and nothing is bought.</div>`)
}
