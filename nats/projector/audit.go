package projector

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

// AuditOptions configure AuditLog.
type AuditOptions struct {
	// Stream and Filter are the log, as for Config.
	Stream string
	Filter string
	Audit  audit.Options
	// Workers decode and check in parallel; default GOMAXPROCS.
	Workers int
	// Progress, if set, is told how far the audit is: "events" while the
	// log is read.
	Progress func(phase string, done, total uint64)
}

func (o AuditOptions) withDefaults() AuditOptions {
	if o.Stream == "" {
		o.Stream = snats.EventStream
	}
	if o.Filter == "" {
		o.Filter = snats.EventSubjectPrefix + ">"
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.Progress == nil {
		o.Progress = func(string, uint64, uint64) {}
	}
	return o
}

// prefix is what a job's subject starts with in the log.
func (o AuditOptions) prefix() string { return Config{Filter: o.Filter}.subjectPrefix() }

// AuditLog reads every event of SERP_EVENTS up to its last sequence when
// called, folds every job and checks it (audit.CheckJob). It returns the
// Auditor, to which the caller adds the command and ledger checks.
//
// It is built to replay millions of events quickly in little memory:
// one goroutine takes messages off an ordered consumer while the others
// decode chunks of them (projections.DecodeLight), and a job is checked,
// and its history let go, as soon as an event finishes it. The rare job
// that has events after that (an authorised re-purchase, or a broken
// log) is read again by its subject and checked whole at the end.
func AuditLog(ctx context.Context, js jetstream.JetStream, o AuditOptions) (*audit.Auditor, error) {
	o = o.withDefaults()
	last, err := lastSeq(ctx, js, o.Stream)
	if err != nil {
		return nil, err
	}
	o.Progress("events", 0, last)
	source := func(emit func([]snats.Message) error) error {
		_, err := snats.NewLog(js, o.Stream, o.Filter).Read(ctx, 1, last, 1024, func(msgs []snats.Message) error {
			if err := emit(msgs); err != nil {
				return err
			}
			o.Progress("events", msgs[len(msgs)-1].Seq, last)
			return nil
		})
		return err
	}
	reload := func(jobID string, through uint64) ([]events.Event, error) {
		return loadJob(ctx, js, o.Stream, o.prefix(), jobID, through, last)
	}
	return auditMessages(ctx, source, reload, o)
}

// AuditEvents audits a recorded log: message bodies as the log holds
// them (an encoded event, or a group of them), in log order (Subject may
// be empty; Seq numbers them).
func AuditEvents(ctx context.Context, msgs []snats.Message, o AuditOptions) (*audit.Auditor, error) {
	o = o.withDefaults()
	source := func(emit func([]snats.Message) error) error {
		for start := 0; start < len(msgs); start += 1024 {
			if err := emit(msgs[start:min(start+1024, len(msgs))]); err != nil {
				return err
			}
		}
		return nil
	}
	reload := func(jobID string, _ uint64) ([]events.Event, error) {
		var h []events.Event
		for _, m := range msgs {
			if got, err := DecodeEvents(o.prefix(), m, true); err == nil && got[0].Event.JobID == jobID {
				for _, rec := range got {
					h = append(h, rec.Event)
				}
			}
		}
		return h, nil
	}
	return auditMessages(ctx, source, reload, o)
}

// loadJob reads one job's events up to sequence last, skipping unreadable
// ones (the first read reported them). The read must reach sequence
// through, the job's last event the audit saw: direct gets may be answered
// by a replica behind the leader, and a history read short would be
// checked as if it were whole.
func loadJob(ctx context.Context, js jetstream.JetStream, stream, prefix, jobID string, through, last uint64) ([]events.Event, error) {
	msgs, err := snats.NewLog(js, stream, prefix+jobID).Get(ctx, 1, last)
	if err != nil {
		return nil, err
	}
	var out []events.Event
	reached := uint64(0)
	for _, m := range msgs {
		reached = m.Seq
		if got, err := DecodeEvents(prefix, m, true); err == nil {
			for _, rec := range got {
				out = append(out, rec.Event)
			}
		}
	}
	return out, checkReached(prefix+jobID, reached, through)
}

func checkReached(subject string, reached, through uint64) error {
	if reached < through {
		return fmt.Errorf("projector: read %s: it ended at sequence %d, before %d (a replica behind the leader answered?)", subject, reached, through)
	}
	return nil
}

// decoded is one chunk of messages, decoded.
type decoded struct {
	recs []projections.Record
	bad  []*eventstore.CorruptError
}

// auditMessages decodes the source's messages in parallel, puts them back
// in log order, and checks each job once it is finished (or at the end).
func auditMessages(ctx context.Context, source func(emit func([]snats.Message) error) error,
	reload func(jobID string, through uint64) ([]events.Event, error), o AuditOptions) (*audit.Auditor, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type chunk struct {
		i    int
		msgs []snats.Message
		out  chan decoded
	}
	// Chunks are decoded in parallel; their results are taken in order.
	in := make(chan chunk, 2*o.Workers)
	ordered := make(chan chan decoded, 4*o.Workers)
	var decoders sync.WaitGroup
	for range o.Workers {
		decoders.Add(1)
		go func() {
			defer decoders.Done()
			for c := range in {
				c.out <- decodeChunk(o.prefix(), c.msgs)
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(ordered)
		defer close(in)
		i := 0
		readErr <- source(func(msgs []snats.Message) error {
			c := chunk{i: i, msgs: msgs, out: make(chan decoded, 1)}
			i++
			select {
			case ordered <- c.out:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case in <- c:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()

	chk := newChecker(o)
	defer chk.close()
	a := audit.New(o.Audit)
	at := map[string]int{}              // every job's place, in the order of their first events
	open := map[string][]events.Event{} // histories of jobs not finished yet; the others were checked
	reopened := map[string]uint64{}     // ... that had events after all: the last one's sequence
	for out := range ordered {
		var d decoded
		select {
		case d = <-out:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		for _, b := range d.bad {
			a.Unreadable(b.Seq, b.JobID, b.Err)
		}
		for _, rec := range d.recs {
			id := rec.Event.JobID
			h, isOpen := open[id]
			if !isOpen {
				if _, checked := at[id]; checked {
					reopened[id] = rec.Seq
					continue
				}
				at[id] = len(at)
				h = make([]events.Event, 0, 8)
			}
			h = append(h, rec.Event)
			if audit.Ends(rec.Event) {
				delete(open, id)
				chk.check(at[id], h, 0)
				continue
			}
			open[id] = h
		}
	}
	decoders.Wait()
	if err := <-readErr; err != nil {
		return nil, err
	}
	for id, h := range open {
		chk.check(at[id], h, 0)
	}
	for id, through := range reopened {
		h, err := reload(id, through)
		if err != nil {
			return nil, err
		}
		chk.check(at[id], h, 1)
	}
	jobs, n := chk.close()
	a.AddJobs(jobs, n)
	return a, nil
}

// decodeChunk decodes messages; those that are not readable events of
// their subject's job are returned apart.
func decodeChunk(prefix string, msgs []snats.Message) decoded {
	d := decoded{recs: make([]projections.Record, 0, len(msgs))}
	for _, m := range msgs {
		got, err := DecodeEvents(prefix, m, true)
		if err == nil {
			d.recs = append(d.recs, got...)
			continue
		}
		var ce *eventstore.CorruptError
		if !errors.As(err, &ce) {
			ce = &eventstore.CorruptError{JobID: strings.TrimPrefix(m.Subject, prefix), Seq: m.Seq, Err: err}
		}
		var de *events.DecodeError
		if ce.JobID == "" && errors.As(err, &de) {
			ce.JobID = de.JobID
		}
		d.bad = append(d.bad, ce)
	}
	return d
}
