package httpops

import (
	"fmt"
	"strings"
	"time"

	"github.com/serpent-engine/serpent/projections"
)

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

// recentJobOf is a job's status value as the recent list shows it at now.
func recentJobOf(v projections.JobView, now time.Time) recentJob {
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
	if c := v.Cancelled; c != nil {
		text := "cancelled by " + c.By
		if c.Reason != "" {
			text += ": " + c.Reason
		}
		if c.Unresolved != "" {
			text += " (the last send of key " + keyPrefix(c.Unresolved) + " has no known outcome)"
		}
		if j.Outcome != "" {
			text = j.Outcome + "; then " + text
		}
		j.Outcome = text
	}
	if v.NextRunAt != nil {
		j.Waits = waitUntil(now, *v.NextRunAt)
	}
	return j
}

func keyPrefix(k string) string {
	if len(k) > 8 {
		return k[:8]
	}
	return k
}
