package eventstore

import (
	"time"

	"github.com/serpent-engine/serpent/events"
)

// Append is one job's part of a group commit: the events to write and the
// version the caller last saw.
type Append struct {
	JobID    string
	Expected uint64
	Events   []events.Event
	// Expires is when the job leaves the log (WithExpiry); zero for never.
	Expires time.Time
}

// Result is the outcome of one Append of a group commit: the job's new
// version, or why it was not written (ErrConcurrency, ErrDuplicate, ...).
type Result struct {
	Version uint64
	Err     error
}

// PlanBatches groups the appends of a group commit into atomic batches of
// at most maxMsgs messages, in order: each batch holds at most one append
// per job, and a job's appends land in batches in the order given, so the
// second append of a job in one group commit is checked after the first.
// size(i) is the messages append i is written as (one, when its events go
// as one message; nil counts one per event). It returns indexes into
// appends; appends for which skip is true (already refused) and appends
// larger than maxMsgs are left out, the caller writes those alone.
func PlanBatches(appends []Append, maxMsgs int, size func(i int) int, skip func(i int) bool) [][]int {
	type batch struct {
		idx  []int
		msgs int
	}
	var batches []*batch
	next := make(map[string]int) // first batch a job's next append may go to
	for i, a := range appends {
		if skip != nil && skip(i) {
			continue
		}
		n := len(a.Events)
		if size != nil {
			n = size(i)
		}
		if n == 0 || n > maxMsgs {
			continue
		}
		for b := next[a.JobID]; ; b++ {
			if b == len(batches) {
				batches = append(batches, &batch{})
			}
			if batches[b].msgs+n <= maxMsgs {
				batches[b].idx = append(batches[b].idx, i)
				batches[b].msgs += n
				next[a.JobID] = b + 1
				break
			}
		}
	}
	out := make([][]int, len(batches))
	for i, b := range batches {
		out[i] = b.idx
	}
	return out
}
