package audit

import (
	"context"
	"runtime"

	"github.com/serpent-engine/serpent/events"
)

// Message is one message of a log as the audit reads it, decoded: the
// events stored at its stream sequence (one, or the group of an append),
// or Err, why it is not a readable event of the job its subject names
// (JobID, "" if unknown).
type Message struct {
	Seq    uint64
	JobID  string
	Events []events.Event
	Err    error
}

// Log is a log as CheckLog reads it: SERP_EVENTS or a recording, read and
// decoded by package nats (nats.AuditLog).
type Log interface {
	// Read hands every message to emit, in log order, in chunks.
	Read(ctx context.Context, emit func([]Message) error) error
	// Jobs reads the messages of some jobs again, up to where Read ended,
	// in one pass: through maps each job id to the sequence of the job's
	// last message Read handed over. A read that ends before it is an
	// error, not a shorter history.
	Jobs(ctx context.Context, through map[string]uint64) (map[string][]Message, error)
}

// CheckLog reads every message of log, folds every job and checks it
// (CheckJob). It returns the Auditor, to which the caller adds the
// command and ledger checks. A message that is not a readable event of
// its subject's job is a finding (Auditor.Unreadable).
//
// It is built to replay millions of events quickly in little memory: jobs
// are checked o.Workers at a time while the log is read, and a job is
// checked, and its history let go, as soon as an event finishes it. The
// rare job that has events after that (an authorised re-purchase, or a
// broken log) is read again (Log.Jobs) and checked whole at the end.
func CheckLog(ctx context.Context, log Log, o Options) (*Auditor, error) {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	chk := newChecker(o)
	defer chk.close()
	a := New(o)
	at := map[string]int{}              // every job's place, in the order of their first events
	open := map[string][]events.Event{} // histories of jobs not finished yet; the others were checked
	reopened := map[string]uint64{}     // ... that had events after all: the last one's sequence
	err := log.Read(ctx, func(msgs []Message) error {
		for _, m := range msgs {
			if m.Err != nil {
				a.Unreadable(m.Seq, m.JobID, m.Err)
				continue
			}
			for _, e := range m.Events {
				id := e.JobID
				h, isOpen := open[id]
				if !isOpen {
					if _, checked := at[id]; checked {
						reopened[id] = m.Seq
						continue
					}
					at[id] = len(at)
					h = make([]events.Event, 0, 8)
				}
				h = append(h, e)
				if Ends(e) {
					delete(open, id)
					chk.check(at[id], h, 0)
					continue
				}
				open[id] = h
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for id, h := range open {
		chk.check(at[id], h, 0)
	}
	again, err := log.Jobs(ctx, reopened)
	if err != nil {
		return nil, err
	}
	for id := range reopened {
		msgs := again[id]
		var h []events.Event
		for _, m := range msgs {
			h = append(h, m.Events...) // unreadable ones were reported
		}
		chk.check(at[id], h, 1)
	}
	jobs, n := chk.close()
	a.AddJobs(jobs, n)
	return a, nil
}
