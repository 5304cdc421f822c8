package httpops

import (
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
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
	"money":  money,
	"plural": plural,
}).Parse(statusHTML))

// statusData is everything the status page shows.
type statusData struct {
	Now         time.Time
	Refresh     int
	Worker      string
	Version     string
	Sandbox     string
	NATS        string
	Counted     bool // the tally has read the log up to its end
	Counts      projections.TallyCounts
	States      []stateCount
	Total       int
	Lag         string
	Reconciling []projections.Reconciling
	RecTotal    int
	Doubled     []string // jobs the API charged twice under one key, the latest first
	Recent      []recentJob
	Days        []dayBar
	Chart       chart
	Accounts    []Account
	Notes       []string
}

type stateCount struct {
	State    aggregate.Status
	N        int
	Terminal bool
}

func (s *Server) statusPage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	d := s.collectStatus(ctx, s.cfg.Now())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := statusTmpl.Execute(w, d); err != nil {
		s.cfg.Logger.Warn("status page", "err", err)
	}
}

// collectStatus reads the tally and the projection buckets. What cannot
// be read becomes a note on the page, not an error.
func (s *Server) collectStatus(ctx context.Context, now time.Time) statusData {
	src, tally := s.cfg.Source, s.cfg.Tally
	_, state := src.Connection()
	d := statusData{Now: now, Refresh: statusRefresh, Worker: s.cfg.Worker, Version: s.cfg.Version, Sandbox: s.cfg.Sandbox, NATS: state}
	d.Counts = tally.Counts()
	for _, st := range aggregate.Statuses() {
		d.States = append(d.States, stateCount{State: st, N: d.Counts.Jobs[st], Terminal: st.Terminal()})
		d.Total += d.Counts.Jobs[st]
	}
	d.Reconciling, d.RecTotal = tally.Reconciling(statusReconciling)
	d.Doubled = tally.Doubled()
	lag, err := src.Lag(ctx, now)
	switch {
	case err != nil:
		d.Notes = append(d.Notes, "projection lag unknown: "+err.Error())
		// No projections to ask (none run anywhere, say): the log's end
		// tells whether the figures are complete.
		if last, lerr := src.LastSeq(ctx); lerr == nil {
			d.Counted = d.Counts.Seq >= last
		}
	default:
		d.Counted = d.Counts.Seq >= lag.Last
		d.Lag = fmt.Sprintf("%d events, %s behind", lag.Pending, lag.Behind.Round(time.Millisecond))
	}
	if jobs, err := src.Jobs(ctx, tally.Recent()); err != nil {
		d.Notes = append(d.Notes, "no job details: "+projections.StatusBucket+": "+err.Error())
	} else {
		for _, v := range jobs[:min(len(jobs), statusRecentJobs)] {
			d.Recent = append(d.Recent, recentJobOf(v, now))
		}
	}
	if days, missing, err := s.readDays(ctx, now); err != nil {
		d.Notes = append(d.Notes, "no spend per day: "+projections.LedgerBucket+": "+err.Error())
	} else {
		d.Days = days
		if len(missing) > 0 {
			d.Notes = append(d.Notes, "spend per day not read for "+strings.Join(missing, ", ")+": shown as nothing bought")
		}
	}
	d.Chart = chartOf(d.Days)
	if d.Accounts, err = src.Accounts(ctx, now); err != nil {
		d.Notes = append(d.Notes, "no API accounts: "+err.Error())
	}
	return d
}
