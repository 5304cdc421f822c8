package nats

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// AuditLog is a log as serpent audit reads it (audit.Log): a stream up
// to its last sequence when the AuditLog was made (NewAuditLog), or a
// recording (RecordedAuditLog). Messages are decoded as the projections
// decode them (DecodeEvents, without results), chunks of them in
// parallel while the next ones are read, and handed over in log order.
type AuditLog struct {
	read    func(ctx context.Context, emit func([]Message) error) error
	jobs    func(ctx context.Context, through map[string]uint64) (map[string][]Message, error)
	prefix  string // what a job's subject starts with
	workers int
}

// NewAuditLog reads where l ends now and returns it as the audit reads
// it. A job's subject is l's filter up to its last token followed by the
// job id (serp.events.<job_id> for serp.events.>). workers chunks are
// decoded at once (0: GOMAXPROCS). progress, if set, is told how far the
// read has come.
func NewAuditLog(ctx context.Context, l Log, workers int, progress func(done, total uint64)) (*AuditLog, error) {
	last, err := l.Last(ctx)
	if err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(uint64, uint64) {}
	}
	prefix := l.filter[:strings.LastIndexByte(l.filter, '.')+1]
	read := func(ctx context.Context, emit func([]Message) error) error {
		progress(0, last)
		_, err := l.Read(ctx, 1, last, 1024, func(msgs []Message) error {
			if err := emit(msgs); err != nil {
				return err
			}
			progress(msgs[len(msgs)-1].Seq, last)
			return nil
		})
		return err
	}
	jobs := func(ctx context.Context, through map[string]uint64) (map[string][]Message, error) {
		out := make(map[string][]Message, len(through))
		for jobID, t := range through {
			subject := prefix + jobID
			msgs, err := l.Subject(subject).Get(ctx, 1, last)
			if err != nil {
				return nil, err
			}
			if err := reaches(subject, msgs, t); err != nil {
				return nil, err
			}
			out[jobID] = msgs
		}
		return out, nil
	}
	return &AuditLog{read: read, jobs: jobs, prefix: prefix, workers: workers}, nil
}

// reaches checks that a job read again reaches through, the job's last
// message the audit saw: a replica behind the leader may answer direct
// gets, and a history read short would be checked as if it were whole.
func reaches(subject string, msgs []Message, through uint64) error {
	if reached := lastSeqOf(msgs); reached < through {
		return fmt.Errorf("nats: read %s: it ended at sequence %d, before %d (a replica behind the leader answered?)", subject, reached, through)
	}
	return nil
}

// RecordedAuditLog is a recorded log as the audit reads it: message
// bodies as the log holds them (an encoded event, or a group of them), in
// log order; Seq numbers them, and Subject may be empty.
func RecordedAuditLog(msgs []Message, workers int) *AuditLog {
	read := func(_ context.Context, emit func([]Message) error) error {
		for start := 0; start < len(msgs); start += 1024 {
			if err := emit(msgs[start:min(start+1024, len(msgs))]); err != nil {
				return err
			}
		}
		return nil
	}
	a := &AuditLog{read: read, prefix: EventSubjectPrefix, workers: workers}
	a.jobs = func(_ context.Context, through map[string]uint64) (map[string][]Message, error) {
		out := map[string][]Message{}
		for _, m := range msgs {
			got := a.decode(m)
			if got.Err != nil {
				continue
			}
			if id := got.Events[0].JobID; through[id] > 0 {
				out[id] = append(out[id], m)
			}
		}
		return out, nil
	}
	return a
}

// Read hands every message to emit decoded, in log order, in chunks.
func (a *AuditLog) Read(ctx context.Context, emit func([]audit.Message) error) error {
	workers := a.workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type chunk struct {
		msgs []Message
		out  chan []audit.Message
	}
	// Chunks are decoded in parallel; their results are taken in order.
	in := make(chan chunk, 2*workers)
	ordered := make(chan chan []audit.Message, 4*workers)
	var decoders sync.WaitGroup
	for range workers {
		decoders.Add(1)
		go func() {
			defer decoders.Done()
			for c := range in {
				c.out <- a.decodeAll(c.msgs)
			}
		}()
	}
	readErr := make(chan error, 1)
	go func() {
		defer close(ordered)
		defer close(in)
		readErr <- a.read(ctx, func(msgs []Message) error {
			c := chunk{msgs: msgs, out: make(chan []audit.Message, 1)}
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
	defer decoders.Wait()
	for out := range ordered {
		var msgs []audit.Message
		select {
		case msgs = <-out:
		case <-ctx.Done():
			return ctx.Err()
		}
		if err := emit(msgs); err != nil {
			cancel()
			for range ordered { // let the reader and the decoders end
			}
			return err
		}
	}
	return <-readErr
}

// Jobs reads some jobs' messages again, decoded (see audit.Log).
func (a *AuditLog) Jobs(ctx context.Context, through map[string]uint64) (map[string][]audit.Message, error) {
	if len(through) == 0 {
		return nil, nil
	}
	msgs, err := a.jobs(ctx, through)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]audit.Message, len(msgs))
	for id, m := range msgs {
		out[id] = a.decodeAll(m)
	}
	return out, nil
}

// decodeAll decodes messages.
func (a *AuditLog) decodeAll(msgs []Message) []audit.Message {
	out := make([]audit.Message, len(msgs))
	for i, m := range msgs {
		out[i] = a.decode(m)
	}
	return out
}

// decode reads a message's events, or says why it is not a readable
// event of its subject's job.
func (a *AuditLog) decode(m Message) audit.Message {
	recs, err := DecodeEvents(a.prefix, m, true)
	if err == nil {
		evs := make([]events.Event, len(recs))
		for i, r := range recs {
			evs[i] = r.Event
		}
		return audit.Message{Seq: m.Seq, JobID: evs[0].JobID, Events: evs}
	}
	ce := &eventstore.CorruptError{JobID: strings.TrimPrefix(m.Subject, a.prefix), Seq: m.Seq, Err: err}
	errors.As(err, &ce)
	var de *events.DecodeError
	if ce.JobID == "" && errors.As(err, &de) {
		ce.JobID = de.JobID
	}
	return audit.Message{Seq: ce.Seq, JobID: ce.JobID, Err: ce.Err}
}

func lastSeqOf(msgs []Message) uint64 {
	if len(msgs) == 0 {
		return 0
	}
	return msgs[len(msgs)-1].Seq
}
