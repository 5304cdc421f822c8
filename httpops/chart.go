package httpops

import (
	"context"
	"time"

	"github.com/serpent-engine/serpent/projections"
)

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

// readDays reads the day ledger of the last statusDays UTC days, oldest
// first; a day without a value has nothing bought. It returns the days it
// could not read too (they stay in the chart, empty).
func (s *Server) readDays(ctx context.Context, now time.Time) (out []dayBar, missing []string, err error) {
	days := make([]string, 0, statusDays)
	for i := statusDays - 1; i >= 0; i-- {
		days = append(days, now.UTC().AddDate(0, 0, -i).Format(projections.DayLayout))
	}
	ledgers, missing, err := s.cfg.Source.DayLedgers(ctx, days)
	if err != nil {
		return nil, nil, err
	}
	for _, day := range days {
		b := dayBar{Day: day}
		if v, ok := ledgers[day]; ok {
			b.Pages, b.Searches, b.SpendMicros = v.Pages+v.ChargedPages, v.Searches, v.EstSpendMicros
		}
		out = append(out, b)
	}
	return out, missing, nil
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
