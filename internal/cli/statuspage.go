package cli

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/metrics"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// Status page settings.
const (
	statusRefresh     = 5 // seconds between the page's own reloads
	statusRecentJobs  = 10
	statusReconciling = 20
	statusDays        = 14
	statusTimeout     = 3 * time.Second
)

//go:embed web/status.html
var statusHTML string

var statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{
	"ago":    func(now, t time.Time) string { return ago(now, t) },
	"clock":  func(t time.Time) string { return t.UTC().Format("15:04:05") },
	"money":  func(micros int64) string { return fmt.Sprintf("$%.2f", float64(micros)/1e6) },
	"plural": plural,
}).Parse(statusHTML))

// statusData is everything the status page shows.
type statusData struct {
	Now         time.Time
	Refresh     int
	Worker      string
	Version     string
	NATS        string
	Counted     bool // the tally has read the log up to its end
	Counts      metrics.Counts
	States      []stateCount
	Total       int
	Lag         string
	Reconciling []metrics.Reconciling
	RecTotal    int
	Doubled     []string // jobs the API charged twice under one key, the latest first
	Recent      []recentJob
	Days        []dayBar
	Chart       chart
	Accounts    []engine.AccountStatus
	Notes       []string
}

type stateCount struct {
	State    aggregate.Status
	N        int
	Terminal bool
}

// recentJob is one job of the recent list with its attempt timeline.
type recentJob struct {
	projections.JobView
	Attempts []attemptRow
	Outcome  string
	Waits    string
}

type attemptRow struct {
	Number    int
	Key       string // the first 8 characters, as in the logs
	Reason    string
	Created   time.Time
	FirstSend *time.Time
	Tries     int
	Class     string
	Definite  bool
}

// dayBar is one day of the ledger.
type dayBar struct {
	Day         string
	Pages       int
	Searches    int
	SpendMicros int64
}

// chart is the geometry of the inline SVG bar chart of pages per day.
type chart struct {
	Width, Height int
	Max           int
	Bars          []chartBar
}

type chartBar struct {
	X, Y, W, H int
	LabelX     int
	Day        string
	Pages      int
	Spend      int64
}

func (s *opsServer) statusPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	d := s.collectStatus(ctx, s.clock())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := statusTmpl.Execute(w, d); err != nil {
		s.log.Warn("status page", "err", err)
	}
}

// collectStatus reads the tally and the projection buckets. What cannot
// be read becomes a note on the page, not an error.
func (s *opsServer) collectStatus(ctx context.Context, now time.Time) statusData {
	d := statusData{Now: now, Refresh: statusRefresh, Worker: s.worker, Version: version, NATS: s.nc.Status().String()}
	d.Counts = s.tally.Counts()
	for _, st := range aggregate.Statuses() {
		d.States = append(d.States, stateCount{State: st, N: d.Counts.Jobs[st], Terminal: st.Terminal()})
		d.Total += d.Counts.Jobs[st]
	}
	d.Reconciling, d.RecTotal = s.tally.Reconciling(statusReconciling)
	d.Doubled = s.tally.Doubled()
	lag, err := projector.ReadLag(ctx, s.js, "", now)
	switch {
	case err != nil:
		d.Notes = append(d.Notes, "projection lag unknown: "+err.Error())
		// No projections to ask (none run anywhere, say): the log's end
		// tells whether the figures are complete.
		if st, serr := s.js.Stream(ctx, snats.EventStream); serr == nil {
			d.Counted = d.Counts.Seq >= st.CachedInfo().State.LastSeq
		}
	default:
		d.Counted = d.Counts.Seq >= lag.Last
		d.Lag = fmt.Sprintf("%d events, %s behind", lag.Pending, lag.Behind.Round(time.Millisecond))
	}
	status, err := s.js.KeyValue(ctx, projections.StatusBucket)
	if err != nil {
		d.Notes = append(d.Notes, "no job details: "+projections.StatusBucket+": "+err.Error())
	} else {
		for _, id := range s.tally.Recent() {
			if len(d.Recent) == statusRecentJobs {
				break
			}
			if j, ok := readJob(ctx, status, id, now); ok {
				d.Recent = append(d.Recent, j)
			}
		}
	}
	ledger, err := s.js.KeyValue(ctx, projections.LedgerBucket)
	if err != nil {
		d.Notes = append(d.Notes, "no spend per day: "+projections.LedgerBucket+": "+err.Error())
	} else {
		var missing []string
		d.Days, missing = readDays(ctx, ledger, now)
		if len(missing) > 0 {
			d.Notes = append(d.Notes, "spend per day not read for "+strings.Join(missing, ", ")+": shown as nothing bought")
		}
	}
	d.Chart = chartOf(d.Days)
	if d.Accounts, err = accountStatuses(ctx, s.js, now); err != nil {
		d.Notes = append(d.Notes, "no API accounts: "+err.Error())
	}
	return d
}

// readJob reads a job's status value; a job not projected yet is left out.
func readJob(ctx context.Context, kv jetstream.KeyValue, id string, now time.Time) (recentJob, bool) {
	e, err := kv.Get(ctx, id)
	if err != nil {
		return recentJob{}, false
	}
	var v projections.JobView
	if json.Unmarshal(e.Value(), &v) != nil {
		return recentJob{}, false
	}
	j := recentJob{JobView: v}
	for _, a := range v.Attempts {
		j.Attempts = append(j.Attempts, attemptRow{Number: a.Number, Key: keyPrefix(a.Key), Reason: a.Reason,
			Created: a.CreatedAt, FirstSend: a.FirstSend, Tries: a.Tries, Class: a.LastClass, Definite: a.Definite})
	}
	switch o := v.LastOutcome; {
	case v.Result != nil:
		j.Outcome = "success → stored (request " + v.Result.RequestID + ")"
		if v.Result.Replayed {
			j.Outcome = "success, replayed → stored (request " + v.Result.RequestID + ")"
		}
	case o != nil:
		parts := []string{o.Class}
		if o.Status != 0 {
			parts = append(parts, fmt.Sprintf("HTTP %d", o.Status))
		}
		for _, p := range []string{o.Code, o.Unknown} {
			if p != "" {
				parts = append(parts, p)
			}
		}
		if o.Replayed {
			parts = append(parts, "replayed")
		}
		j.Outcome = strings.Join(parts, " ") + " → " + o.Action
	}
	if v.NextRunAt != nil {
		j.Waits = "until " + v.NextRunAt.UTC().Format("15:04:05") + " (" + until(now, *v.NextRunAt) + ")"
	}
	return j, true
}

// readDays reads the day ledger of the last statusDays UTC days, oldest
// first; a day without a value has nothing bought. It returns the days it
// could not read too (they stay in the chart, empty).
func readDays(ctx context.Context, kv jetstream.KeyValue, now time.Time) (out []dayBar, missing []string) {
	for i := statusDays - 1; i >= 0; i-- {
		day := now.UTC().AddDate(0, 0, -i).Format(projections.DayLayout)
		b := dayBar{Day: day}
		e, err := kv.Get(ctx, projections.LedgerDayPrefix+day)
		if err == nil {
			var v projections.DayLedger
			if json.Unmarshal(e.Value(), &v) == nil {
				b.Pages, b.Searches, b.SpendMicros = v.Pages+v.ChargedPages, v.Searches, v.EstSpendMicros
			}
		} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
			missing = append(missing, day)
		}
		out = append(out, b)
	}
	return out, missing
}

// chartOf lays the days out as bars of billed pages.
func chartOf(days []dayBar) chart {
	const barW, gap, plotH, top = 36, 8, 120, 20
	c := chart{Width: len(days)*(barW+gap) + gap, Height: plotH + top + 34}
	for _, d := range days {
		c.Max = max(c.Max, d.Pages)
	}
	for i, d := range days {
		h := 0
		if c.Max > 0 {
			h = d.Pages * plotH / c.Max
		}
		if d.Pages > 0 {
			h = max(h, 2)
		}
		x := gap + i*(barW+gap)
		c.Bars = append(c.Bars, chartBar{X: x, Y: top + plotH - h, W: barW, H: h, LabelX: x + barW/2,
			Day: d.Day[5:], Pages: d.Pages, Spend: d.SpendMicros})
	}
	return c
}

func keyPrefix(k string) string {
	if len(k) > 8 {
		return k[:8]
	}
	return k
}

// ago says how long before now t was, roughly.
func ago(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	if d := now.Sub(t); d >= time.Second {
		return roughly(d) + " ago"
	}
	return "just now"
}

// until says how long after now t is, roughly.
func until(now, t time.Time) string {
	if d := t.Sub(now); d > 0 {
		return "in " + roughly(d)
	}
	return "due now"
}

func roughly(d time.Duration) string {
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// plural picks the word for n things.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
