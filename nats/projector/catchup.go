package projector

import (
	"time"
)

// catchUpEvery is how often a runner catching up logs how far it got.
const catchUpEvery = 5 * time.Second

// CatchUp is how far a runner that trails the log has got since it began
// to catch up. Like Lag, it counts the log's messages as events (a
// message holds one event, or the group of an append).
type CatchUp struct {
	// Since is when the runner began to catch up: when it fetched the
	// first full batch.
	Since time.Time `json:"since"`
	// Done are the events applied since; Pending those after the newest
	// applied, as the server counted them when it delivered it.
	Done    uint64 `json:"done"`
	Pending uint64 `json:"pending"`
	// Rate is Done a second since Since.
	Rate float64 `json:"events_per_sec"`
}

// Total is Done and Pending.
func (c CatchUp) Total() uint64 { return c.Done + c.Pending }

// Left is how long Pending takes at Rate; 0 before there is a rate.
func (c CatchUp) Left() time.Duration {
	if c.Rate <= 0 {
		return 0
	}
	return time.Duration(float64(c.Pending) / c.Rate * float64(time.Second))
}

// catchingUp is what a runner remembers of its catch-up.
type catchingUp struct {
	CatchUp
	from     uint64    // the first sequence of the first full batch
	logged   time.Time // when progress was last logged
	reported bool      // progress was logged: the end is too
}

// CatchingUp reports whether the runner is catching up with the log (it
// holds the lease, and its last batch was full with more waiting), and
// how far it got.
func (r *Runner) CatchingUp() (CatchUp, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.catchUp == nil || !r.stats.Holding {
		return CatchUp{}, false
	}
	return r.catchUp.CatchUp, true
}

// track follows a catch-up after a batch was written: fetched at start,
// the batch applied the sequences from..to, and the server had pending
// more after to. A full batch with more after it begins a catch-up, or
// goes on with it; any other took all there was, and ends it.
func (r *Runner) track(start time.Time, from, to, pending uint64, full bool) {
	now := time.Now()
	r.mu.Lock()
	going := full && pending > 0
	c := r.catchUp
	if c == nil {
		if !going {
			r.mu.Unlock()
			return
		}
		c = &catchingUp{CatchUp: CatchUp{Since: start}, from: from, logged: now}
		r.catchUp = c
	}
	c.Done, c.Pending = to-c.from+1, pending
	if took := now.Sub(c.Since).Seconds(); took > 0 {
		c.Rate = float64(c.Done) / took
	}
	due := going && now.Sub(c.logged) >= catchUpEvery
	if due {
		c.logged, c.reported = now, true
	}
	if !going {
		r.catchUp = nil
	}
	p, reported := c.CatchUp, c.reported
	r.mu.Unlock()
	switch {
	case due:
		r.log.Info("projections: catching up", "done", p.Done, "total", p.Total(), "percent", percent(p.Done, p.Total()),
			"events_per_sec", int(p.Rate), "eta", p.Left().Round(time.Second))
	case !going && reported:
		r.log.Info("projections: caught up", "events", p.Done, "took", now.Sub(p.Since).Round(time.Millisecond),
			"events_per_sec", int(p.Rate), "last_seq", to)
	}
}

func percent(done, total uint64) int {
	if total == 0 {
		return 100
	}
	return int(done * 100 / total)
}
