package recurring

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Spec is a parsed schedule expression: a cron expression or an interval.
// Next gives the slots; they are what the expression names, exactly, so
// every engine that computes them agrees.
type Spec interface {
	// Next returns the first slot strictly after t, or the zero time if
	// there is none within Horizon (then there is none at all).
	Next(t time.Time) time.Time
	// String is the expression as written.
	String() string
}

// Parse reads a schedule expression:
//
//   - "@every <duration>" (at least 1s): slots every duration, counted from
//     anchor;
//   - "@yearly", "@annually", "@monthly", "@weekly", "@daily",
//     "@midnight", "@hourly";
//   - a cron expression of 5 fields (minute hour day-of-month month
//     day-of-week) or 6 with seconds first, each field "*", a value, a
//     range "a-b", a step "*/n" or "a-b/n", or a list of those; months
//     and weekdays may be names (JAN, MON); "?" means "*" in the day
//     fields. As in Vixie cron, a day field that starts with "*" ("*",
//     "*/2") is a star: when either day field is one, a day matches if
//     both do; when both are restricted, if either does. A weekday step
//     from a value ("MON/2") runs to Saturday; 7 is Sunday only when
//     written.
//
// Cron slots are computed in loc (UTC if nil); a wall time that a daylight
// saving change skips is not a slot, one it repeats is a slot once.
func Parse(expr string, loc *time.Location, anchor time.Time) (Spec, error) {
	if loc == nil {
		loc = time.UTC
	}
	e := strings.TrimSpace(expr)
	if rest, ok := strings.CutPrefix(e, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("schedule %q: %v", expr, err)
		}
		if d < time.Second {
			return nil, fmt.Errorf("schedule %q: the interval must be at least 1s", expr)
		}
		if anchor.IsZero() {
			return nil, fmt.Errorf("schedule %q: an interval needs a start time to count from", expr)
		}
		return every{d: d, anchor: anchor.Truncate(time.Second), expr: e}, nil
	}
	if d, ok := descriptors[strings.ToLower(e)]; ok {
		e = d
	}
	fields := strings.Fields(e)
	switch len(fields) {
	case 5:
		fields = append([]string{"0"}, fields...)
	case 6:
	default:
		return nil, fmt.Errorf("schedule %q: a cron expression has 5 fields (or 6 with seconds first), this has %d", expr, len(fields))
	}
	c := cron{loc: loc, expr: strings.TrimSpace(expr)}
	var errs []error
	for i, f := range fields {
		set, star, err := parseField(f, cronFields[i])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s field %q: %w", cronFields[i].name, f, err))
		}
		c.sets[i], c.star[i] = set, star
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("schedule %q: %w", expr, err)
	}
	return c, nil
}

var descriptors = map[string]string{
	"@yearly": "0 0 0 1 1 *", "@annually": "0 0 0 1 1 *", "@monthly": "0 0 0 1 * *",
	"@weekly": "0 0 0 * * 0", "@daily": "0 0 0 * * *", "@midnight": "0 0 0 * * *", "@hourly": "0 0 * * * *",
}

type fieldDef struct {
	name     string
	min, max int
	names    map[string]int
}

var cronFields = [6]fieldDef{
	{name: "second", min: 0, max: 59},
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day-of-month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}},
	{name: "day-of-week", min: 0, max: 7, names: map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}},
}

// parseField returns the set of values a field allows (a bit per value)
// and whether it is a star (starts with "*", or is a day field's "?").
func parseField(f string, def fieldDef) (uint64, bool, error) {
	if f == "*" || (f == "?" && (def.name == "day-of-month" || def.name == "day-of-week")) {
		return span(def.min, def.max, 1), true, nil
	}
	star := strings.HasPrefix(f, "*")
	var set uint64
	for _, part := range strings.Split(f, ",") {
		rng, stepStr, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepStr)
			if err != nil || n < 1 {
				return 0, false, fmt.Errorf("step %q is not a positive number", stepStr)
			}
			step = n
		}
		lo, hi := def.min, def.max
		if def.name == "day-of-week" {
			hi = 6 // a step over the week ends on Saturday; 7 (Sunday) only when written
		}
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err error
			if lo, err = value(a, def); err != nil {
				return 0, false, err
			}
			if hi, err = value(b, def); err != nil {
				return 0, false, err
			}
			if lo > hi {
				return 0, false, fmt.Errorf("range %q runs backwards", rng)
			}
		default:
			v, err := value(rng, def)
			if err != nil {
				return 0, false, err
			}
			lo = v
			if !hasStep {
				hi = v
			}
		}
		set |= span(lo, hi, step)
	}
	if def.name == "day-of-week" && set&(1<<7) != 0 {
		set = set&^(1<<7) | 1 // 7 is Sunday too
	}
	return set, star, nil
}

func value(s string, def fieldDef) (int, error) {
	if v, ok := def.names[strings.ToLower(s)]; ok {
		return v, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if v < def.min || v > def.max {
		return 0, fmt.Errorf("%d is outside %d-%d", v, def.min, def.max)
	}
	return v, nil
}

func span(lo, hi, step int) uint64 {
	var s uint64
	for v := lo; v <= hi; v += step {
		s |= 1 << uint(v)
	}
	return s
}

// Horizon is how far ahead Next looks for a slot. The Gregorian calendar,
// weekdays included, repeats every 400 years, so an expression with no
// slot within them has none ever (29 February on a Sunday comes every 28
// years or so, with gaps of up to 40).
const Horizon = 400 // years

type cron struct {
	sets [6]uint64
	star [6]bool
	loc  *time.Location
	expr string
}

func (c cron) String() string { return c.expr }

func (c cron) has(field, v int) bool { return c.sets[field]&(1<<uint(v)) != 0 }

// dayMatches applies the day-of-month / day-of-week rule.
func (c cron) dayMatches(day int, weekday time.Weekday) bool {
	dom, dow := c.has(3, day), c.has(5, int(weekday))
	if c.star[3] || c.star[5] {
		return dom && dow
	}
	return dom || dow
}

// nextDay returns the first date from year y, month m, day d on (d may
// run past the month's end) in an allowed month whose day matches, and
// false if there is none before the year last. It counts on the calendar
// alone, a month at a time, so a search over centuries stays cheap.
func (c cron) nextDay(y int, m time.Month, d, last int) (int, time.Month, int, bool) {
	first := time.Date(y, m, d, 0, 0, 0, 0, time.UTC) // normalised: 32 January is 1 February
	y, m, d = first.Date()
	for y < last {
		if c.has(4, int(m)) {
			days := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
			wd := time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Weekday()
			for ; d <= days; d++ {
				if c.dayMatches(d, wd) {
					return y, m, d, true
				}
				wd = (wd + 1) % 7
			}
		}
		if m == time.December {
			y, m = y+1, time.January
		} else {
			m++
		}
		d = 1
	}
	return 0, 0, 0, false
}

// Next walks forward field by field (date, hour, minute, second) in the
// schedule's time zone, as robfig/cron does, up to Horizon years ahead.
// The date is found by counting on the calendar (nextDay); only the time
// of day is walked in the zone.
func (c cron) Next(after time.Time) time.Time {
	t := after.In(c.loc).Truncate(time.Second).Add(time.Second)
	limit := t.AddDate(Horizon, 0, 0)
	// jump moves t to next, a wall time computed with time.Date. A wall
	// time a daylight saving change skips comes out as an earlier instant
	// where the zone's offset is negative (Go moves it back by the gap):
	// then t goes on by a minute of real time instead, so it always moves
	// forward and the checks below see the hours after the gap.
	jump := func(next time.Time) {
		if !next.After(t) {
			next = t.Truncate(time.Minute).Add(time.Minute)
		}
		t = next
	}
	for t.Before(limit) {
		if !c.has(4, int(t.Month())) || !c.dayMatches(t.Day(), t.Weekday()) {
			y, m, d, ok := c.nextDay(t.Year(), t.Month(), t.Day()+1, limit.Year()+1)
			if !ok {
				break
			}
			jump(time.Date(y, m, d, 0, 0, 0, 0, c.loc))
			continue
		}
		if !c.has(2, t.Hour()) {
			jump(firstOf(time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, c.loc)))
			continue
		}
		if !c.has(1, t.Minute()) {
			t = t.Truncate(time.Minute).Add(time.Minute)
			continue
		}
		if !c.has(0, t.Second()) {
			t = t.Add(time.Second)
			continue
		}
		// A skipped wall time is never a slot (time.Date moves it out of
		// the gap, where the checks above see it afresh). A wall time a
		// change repeats is a slot the first time only.
		if secondPass(t) > 0 {
			t = t.Add(time.Second)
			continue
		}
		return t
	}
	return time.Time{}
}

// firstOf returns the earlier of the two instants a wall time names when a
// daylight saving change repeats it, so a repeated stretch's slots come in
// its first pass and only then.
func firstOf(t time.Time) time.Time {
	if back := secondPass(t); back > 0 {
		return t.Add(-back)
	}
	return t
}

// secondPass reports, for an instant whose wall time the zone's last change
// repeats (the clocks went back, by an hour or by any other amount), by how
// much they went back; 0 for any other instant.
func secondPass(t time.Time) time.Duration {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return 0
	}
	_, now := t.Zone()
	_, before := start.Add(-time.Second).Zone()
	if back := time.Duration(before-now) * time.Second; back > 0 && t.Sub(start) < back {
		return back
	}
	return 0
}

type every struct {
	d      time.Duration
	anchor time.Time
	expr   string
}

func (e every) String() string { return e.expr }

func (e every) Next(after time.Time) time.Time {
	if after.Before(e.anchor) {
		return e.anchor
	}
	n := after.Sub(e.anchor)/e.d + 1
	return e.anchor.Add(n * e.d)
}
