package projections

import (
	"bytes"
	"encoding/hex"
	"slices"
)

// LiveJobs are the ids of jobs in flight, as a sweep for lost timers
// takes them (engine.JobList): each id of 32 lowercase hex digits in the
// 16 bytes a tally keeps it in, any other as a string. A million jobs
// take 16 MB with no pointer for the garbage collector to follow, where
// strings would take 48.
type LiveJobs struct {
	hex  []hexID  // sorted
	wide []string // sorted
}

// Len is how many jobs there are.
func (l *LiveJobs) Len() int { return len(l.hex) + len(l.wide) }

// ID is the id of job i, for i from 0 to Len()-1.
func (l *LiveJobs) ID(i int) string {
	if i < len(l.hex) {
		return hex.EncodeToString(l.hex[i][:])
	}
	return l.wide[i-len(l.hex)]
}

// Index is the place of id in l, if it is there.
func (l *LiveJobs) Index(id string) (int, bool) {
	if h, ok := parseHexID(id); ok {
		if k, found := slices.BinarySearchFunc(l.hex, h, compareHex); found {
			return k, true
		}
	}
	// A job whose counts do not fit a packed one is kept by its id,
	// however it is spelt.
	k, found := slices.BinarySearch(l.wide, id)
	return len(l.hex) + k, found
}

func compareHex(a, b hexID) int { return bytes.Compare(a[:], b[:]) }

// Live returns the jobs that, as far as t has counted the log, are not
// finished (or wait for the check of their charges), and whether t has counted the log as it stood when its
// reader began (only then are these all the jobs in flight then). A tally
// that forgets finished jobs holds only these, so it answers in time
// proportional to the jobs in flight, not to the jobs ever run.
func (t *Tally) Live() (*LiveJobs, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, p := range t.jobs {
		if p.unpack().live() {
			n++
		}
	}
	l := LiveJobs{hex: make([]hexID, 0, n)}
	for h, p := range t.jobs {
		if p.unpack().live() {
			l.hex = append(l.hex, h)
		}
	}
	for id, j := range t.wide {
		if j.live() {
			l.wide = append(l.wide, id)
		}
	}
	slices.SortFunc(l.hex, compareHex)
	slices.Sort(l.wide)
	return &l, t.caughtUp
}

// CaughtUp reports whether t has counted the log as it stood when its
// reader began (CatchUpTo).
func (t *Tally) CaughtUp() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.caughtUp
}
