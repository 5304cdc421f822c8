package httpops

import (
	"fmt"
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

// plural picks the word for n things.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
