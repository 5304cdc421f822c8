package httpops

import (
	"fmt"
	"strings"
	"time"
)

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

// money writes micro-dollars as dollars with at least two decimals and
// as many more as a fraction of a cent needs: $0.003, $1.50.
func money(micros int64) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", micros%1e6), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return fmt.Sprintf("%s$%d.%s", sign, micros/1e6, frac)
}

// waitUntil says when t is: its time of day if it is today (UTC), else
// its date too, and how long from now.
func waitUntil(now, t time.Time) string {
	layout := "15:04:05"
	if t.UTC().Format(time.DateOnly) != now.UTC().Format(time.DateOnly) {
		layout = "2006-01-02 15:04:05"
	}
	return "until " + t.UTC().Format(layout) + " UTC (" + until(now, t) + ")"
}

// plural picks the word for n things.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
