package chaos

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
)

// watch follows SERP_EVENTS as it grows and tells when every job of the
// run is finished and every malformed command rejected. It reads each
// event once, following the log (snats.Log.Follow) again after the
// server restarts.
type watch struct {
	r    *run
	done chan struct{} // closed once every job is finished

	mu       sync.Mutex
	want     map[string]bool // the run's jobs
	terminal map[string]bool
	left     int    // jobs of the run not finished
	seq      uint64 // last stream sequence read
	closed   bool
}

func newWatch(r *run) *watch {
	w := &watch{r: r, done: make(chan struct{}), want: map[string]bool{}, terminal: map[string]bool{}}
	for _, c := range r.cmds {
		if c.job != "" {
			w.want[c.job] = true
		}
	}
	w.left = len(w.want)
	return w
}

func (w *watch) finished() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.want) - w.left
}

// run reads events until ctx ends.
func (w *watch) run(ctx context.Context) {
	for ctx.Err() == nil {
		if err := w.follow(ctx); err != nil && ctx.Err() == nil {
			time.Sleep(500 * time.Millisecond)
		}
	}
}

func (w *watch) follow(ctx context.Context) error {
	w.mu.Lock()
	after := w.seq
	w.mu.Unlock()
	return snats.EventLog(w.r.js).Follow(ctx, after, func(msg snats.Message) error {
		job := strings.TrimPrefix(msg.Subject, snats.EventSubjectPrefix)
		ev, derr := events.DecodeLast(msg.Data)
		w.mu.Lock()
		defer w.mu.Unlock()
		w.seq = msg.Seq
		if was, now := w.terminal[job], derr == nil && finishedBy(ev); was != now {
			w.terminal[job] = now
			if w.want[job] && now {
				w.left--
			} else if w.want[job] {
				w.left++
			}
		}
		if w.left == 0 && !w.closed {
			w.closed = true
			close(w.done)
		}
		return nil
	})
}

// finishedBy reports whether a job whose last event is ev is finished.
func finishedBy(ev events.Event) bool {
	switch d := ev.Data.(type) {
	case events.ObservationStored:
		return !d.CheckCharges // else its charges are checked next
	case events.ChargesChecked, events.JobFailed, events.JobCancelled:
		return true
	case events.Reconciled:
		return d.Verdict == aggregate.VerdictCharged
	}
	return false
}
