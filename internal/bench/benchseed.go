package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	snats "github.com/serpent-engine/serpent/nats"
)

// benchSeeder writes finished jobs straight into SERP_EVENTS, exactly as
// the engine would have written them: the events aggregate.Decide gives
// for a job scheduled, sent and answered (a success, a lost reply resent
// with the same key, a 408 and a new key, or a confirmed failure), one
// append per decision, encoded by eventstore.EncodeAppend (type and schema
// headers, the expected last subject sequence on the first message of
// each append) on the job's subject. A thousand jobs are interleaved at a
// time, as a busy engine interleaves them.
type benchSeeder struct {
	tag    string
	base   time.Time
	msgIDs bool
	run    uint32
	// inflight: each job is only scheduled (its JobScheduled), for a slot
	// from base on, which is ahead.
	inflight bool
}

// seedSpacing is the time between two seeded jobs' slots: a million jobs
// span about five weeks, ending before now.
const seedSpacing = 3 * time.Second

// seedMaxMessage is the largest message the seeder packs an append into:
// the server's default max_payload, far above a seeded append's size.
const seedMaxMessage = 1 << 20

// newBenchSeeder seeds jobs of its own: the tag and the time make their
// ids unlike any other run's. With msgIDs the messages carry Nats-Msg-Id
// as appends do; without, the server keeps no duplicate-window entry for
// each (Load and the audit do not need them).
func newBenchSeeder(tag string, msgIDs bool) *benchSeeder {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &benchSeeder{
		tag:    fmt.Sprintf("%s %d", tag, time.Now().UnixNano()),
		base:   time.Now().UTC().Add(-40 * 24 * time.Hour).Truncate(24 * time.Hour),
		msgIDs: msgIDs,
		run:    binary.BigEndian.Uint32(b[:]),
	}
}

// inflightAhead is how far ahead of now the first slot of jobs seeded
// in flight is: far enough that none comes due while a bench runs.
const inflightAhead = 48 * time.Hour

// newInflightSeeder seeds jobs in flight: scheduled for slots from two
// days ahead on (a million span some five weeks), not yet sent.
func newInflightSeeder(tag string) *benchSeeder {
	s := newBenchSeeder(tag, true)
	s.base = time.Now().UTC().Add(inflightAhead).Truncate(time.Hour)
	s.inflight = true
	return s
}

func (s *benchSeeder) command(i int) aggregate.ScheduleCommand {
	return aggregate.ScheduleCommand{
		Slot:     s.base.Add(time.Duration(i) * seedSpacing).Format(time.RFC3339),
		Query:    fmt.Sprintf("serpent bench %s %d", s.tag, i),
		Country:  "US",
		Language: "en",
		Device:   [2]string{"desktop", "mobile"}[i%2],
	}
}

func (s *benchSeeder) schedule(i int) (aggregate.Schedule, error) {
	sched, err := aggregate.NewSchedule(s.command(i), aggregate.DefaultPolicy(), "bench")
	if err != nil {
		return sched, fmt.Errorf("bench: seeding job %d: %w", i, err)
	}
	return sched, nil
}

// jobID is the id of seeded job i.
func (s *benchSeeder) jobID(i int) (string, error) {
	sched, err := s.schedule(i)
	return sched.JobID, err
}

// seedJob is one seeded job: its appends, and the stream sequence of its
// last message once written.
type seedJob struct {
	id      string
	appends [][]*natsgo.Msg
	last    uint64
	events  int
}

// job makes seeded job i's appends.
func (s *benchSeeder) job(ids *seedIDs, i int) (seedJob, error) {
	sched, err := s.schedule(i)
	if err != nil {
		return seedJob{}, err
	}
	j := seedJob{id: sched.JobID}
	subject := snats.EventSubjectPrefix + j.id
	var st aggregate.State
	now := sched.Slot
	do := func(in aggregate.Input) error {
		ids.at = now
		evs, err := aggregate.Decide(st, in, now, ids)
		if err != nil {
			return fmt.Errorf("bench: seeding job %d: %T: %w", i, in, err)
		}
		for _, e := range evs {
			st = aggregate.Apply(st, e)
		}
		msgs, err := eventstore.EncodeAppend(j.id, 0, evs)
		if err != nil {
			return fmt.Errorf("bench: seeding job %d: %w", i, err)
		}
		msgs = eventstore.Pack(msgs, seedMaxMessage) // as the event store writes it
		wire := make([]*natsgo.Msg, len(msgs))
		for k, m := range msgs {
			h := natsgo.Header(m.Header)
			if !s.msgIDs {
				delete(h, events.HeaderMsgID)
			}
			wire[k] = &natsgo.Msg{Subject: subject, Header: h, Data: m.Data}
		}
		j.appends = append(j.appends, wire)
		j.events += len(evs)
		return nil
	}
	send := func() error {
		if n := st.Next(now); n.Step == aggregate.StepWait {
			now = n.At
		}
		return do(aggregate.Due{Worker: "bench-seed"})
	}
	reply := func(o aggregate.Outcome) error {
		now = now.Add(time.Second)
		cur, _ := st.Current()
		o.Key, o.Try = cur.Key, cur.Tries
		return do(o)
	}
	if s.inflight {
		if err := do(sched); err != nil {
			return seedJob{}, err
		}
		return j, nil
	}
	steps := []func() error{func() error { return do(sched) }, send}
	switch i % 20 {
	case 0, 1, 2: // the reply was lost: the same key again
		steps = append(steps, func() error { return reply(aggregate.Outcome{Unknown: "timeout"}) }, send)
	case 3, 4: // a timeout the API reported: a new key
		steps = append(steps, func() error {
			return reply(aggregate.Outcome{Status: 408, Code: "search_timeout", RequestID: fmt.Sprintf("req_%x_%d_t", s.run, i)})
		}, send)
	}
	if i%20 == 5 { // a confirmed failure
		steps = append(steps, func() error {
			return reply(aggregate.Outcome{Status: 400, Code: "invalid_request", Message: "bad query", RequestID: fmt.Sprintf("req_%x_%d", s.run, i)})
		})
	} else {
		steps = append(steps, func() error {
			reqID := fmt.Sprintf("req_%x_%d", s.run, i)
			return reply(aggregate.Outcome{Status: 200, RequestID: reqID, Result: seedResult(reqID, sched, now), Pages: 1})
		})
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return seedJob{}, err
		}
	}
	if !st.Status.Terminal() {
		return seedJob{}, fmt.Errorf("bench: seeded job %d ends %s, not finished", i, st.Status)
	}
	return j, nil
}

// seedResult is a result body like the sandbox's: ten organic results,
// about 2 KB.
func seedResult(reqID string, sched aggregate.Schedule, at time.Time) []byte {
	q, _ := json.Marshal(sched.Search.Query)
	var b strings.Builder
	b.Grow(2300)
	fmt.Fprintf(&b, `{"requestId":%q,"search":%s,"organic":[`, reqID, sched.Body)
	for i := 1; i <= 10; i++ {
		if i > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"position":%d,"title":"Best %s of the year, tested","link":"https://reviews.example.org/serpent-bench/%d","snippet":"We compared every %s we could find in US and ranked them by what matters."}`,
			i, q[1:len(q)-1], 1000+i, q[1:len(q)-1])
	}
	fmt.Fprintf(&b, `],"pages":1,"searchedAt":%q}`, at.UTC().Format(time.RFC3339))
	return []byte(b.String())
}

// seed writes jobs [from, to) and returns the events written. Windows of
// a thousand jobs are made in parallel and written in order by one
// publisher, round by round (every job's first append, then every job's
// second, ...), with asynchronous publishes: the log is this writer's
// alone, so each message's sequence is known before it is acknowledged,
// and each append expects its job's previous one (each acknowledgement is
// checked against it). Atomic batches would stage every message on disk
// once more.
func (s *benchSeeder) seed(ctx context.Context, js jetstream.JetStream, from, to int, label string, prog progressFunc) (uint64, error) {
	const window = 1000
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	type made struct {
		jobs []seedJob
		err  error
	}
	workers := max(1, runtime.GOMAXPROCS(0)-1)
	ordered := make(chan chan made, workers+1)
	go func() {
		defer close(ordered)
		sem := make(chan struct{}, workers)
		for lo := from; lo < to; lo += window {
			out := make(chan made, 1)
			select {
			case ordered <- out:
			case <-ctx.Done():
				return
			}
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			go func(lo, hi int) {
				defer func() { <-sem }()
				ids := &seedIDs{run: s.run, n: uint64(lo) * 100} // a job takes fewer than 100 ids
				jobs := make([]seedJob, 0, hi-lo)
				for i := lo; i < hi; i++ {
					j, err := s.job(ids, i)
					if err != nil {
						out <- made{err: err}
						return
					}
					jobs = append(jobs, j)
				}
				out <- made{jobs: jobs}
			}(lo, min(lo+window, to))
		}
	}()

	last, err := lastSeq(ctx, js, snats.EventStream)
	if err != nil {
		return 0, err
	}
	// The acknowledgements, checked in order; the channel bounds the
	// publishes in flight.
	type inflight struct {
		ack    jetstream.PubAckFuture
		seq    uint64
		events uint64 // the message holds
	}
	acks := make(chan inflight, 2048)
	var written atomic.Uint64
	checked := make(chan struct{})
	go func() {
		defer close(checked)
		for a := range acks {
			select {
			case ack := <-a.ack.Ok():
				if ack.Sequence != a.seq {
					cancel(fmt.Errorf("bench: seeding: a message was stored at sequence %d, not %d: another writer?", ack.Sequence, a.seq))
				}
				written.Add(a.events)
			case err := <-a.ack.Err():
				cancel(fmt.Errorf("bench: seeding, at sequence %d: %w", a.seq, err))
			case <-ctx.Done():
			}
		}
	}()
	done := 0
	publish := func(jobs []seedJob) error {
		for round := 0; ; round++ {
			more := false
			for k := range jobs {
				j := &jobs[k]
				if round >= len(j.appends) {
					continue
				}
				more = true
				app := j.appends[round]
				app[0].Header[events.HeaderExpectedSeq] = []string{strconv.FormatUint(j.last, 10)}
				for _, m := range app {
					fut, err := js.PublishMsgAsync(m)
					if err != nil {
						return fmt.Errorf("bench: seeding: %w", err)
					}
					last++
					select {
					case acks <- inflight{fut, last, uint64(events.HeaderEvents(m.Header.Get(events.HeaderType)))}:
					case <-ctx.Done():
						return context.Cause(ctx)
					}
				}
				j.last = last
			}
			if !more {
				return nil
			}
		}
	}
	for out := range ordered {
		var m made
		select {
		case m = <-out:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		if m.err == nil {
			m.err = publish(m.jobs)
		}
		if m.err != nil {
			cancel(m.err)
			break
		}
		done += len(m.jobs)
		prog(label, done, to-from)
	}
	close(acks)
	<-checked
	for range ordered {
		// let the window makers finish
	}
	if err := context.Cause(ctx); err != nil {
		return written.Load(), err
	}
	return written.Load(), nil
}

// seedIDs gives seeded events ULIDs of their own time and keys shaped like
// UUIDs, unique to the run and the worker.
type seedIDs struct {
	run uint32
	n   uint64
	at  time.Time
}

func (s *seedIDs) EventID() string {
	s.n++
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(s.at))
	var e [10]byte
	binary.BigEndian.PutUint32(e[:4], s.run)
	e[4], e[5], e[6], e[7], e[8], e[9] = byte(s.n>>40), byte(s.n>>32), byte(s.n>>24), byte(s.n>>16), byte(s.n>>8), byte(s.n)
	_ = id.SetEntropy(e[:])
	return id.String()
}

func (s *seedIDs) AttemptKey() string {
	s.n++
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", s.run, (s.n>>56)&0xff, (s.n>>48)&0xff, 0, s.n&0xffffffffffff)
}
