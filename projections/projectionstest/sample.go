// Package projectionstest makes job histories for the tests of the
// projections, the audit and the projection runner: jobs driven through
// aggregate.Decide on a fake clock, with predictable ids.
package projectionstest

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
)

// T0 is the start of every sample's clock: 2026-12-02 14:00 UTC.
var T0 = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

// IDs gives predictable ids: ULIDs and keys numbered in order.
type IDs struct{ n uint64 }

// IDsFrom numbers ids after n, so two logs of one test do not share ids.
func IDsFrom(n uint64) *IDs { return &IDs{n: n} }

func (s *IDs) EventID() string {
	s.n++
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(T0))
	var e [10]byte
	binary.BigEndian.PutUint64(e[2:], s.n)
	_ = id.SetEntropy(e[:])
	return id.String()
}

func (s *IDs) AttemptKey() string {
	s.n++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", s.n)
}

// Job drives one job through Decide, keeping its log.
type Job struct {
	T   testing.TB
	S   aggregate.State
	Log []events.Event
	IDs *IDs
	Now time.Time
}

// NewJob schedules a job for query with the default policy at now.
func NewJob(t testing.TB, ids *IDs, query string, now time.Time) *Job {
	t.Helper()
	j := &Job{T: t, IDs: ids, Now: now}
	sched, err := aggregate.NewSchedule(aggregate.ScheduleCommand{
		Slot: now.Format(time.RFC3339), Query: query, Country: "US", Language: "en", Device: "mobile",
	}, aggregate.DefaultPolicy(), "test")
	if err != nil {
		t.Fatalf("projectionstest: %v", err)
	}
	j.Do(sched)
	return j
}

// Do decides one input at j.Now and applies what it returns.
func (j *Job) Do(in aggregate.Input) {
	j.T.Helper()
	evs, err := aggregate.Decide(j.S, in, j.Now, j.IDs)
	if err != nil {
		j.T.Fatalf("projectionstest: %T: %v", in, err)
	}
	for _, e := range evs {
		j.S = aggregate.Apply(j.S, e)
	}
	j.Log = append(j.Log, evs...)
}

// Send waits until the job is due and claims it for worker w1.
func (j *Job) Send() {
	j.T.Helper()
	if n := j.S.Next(j.Now); n.Step == aggregate.StepWait {
		j.Now = n.At
	}
	j.Do(aggregate.Due{Worker: "w1"})
}

// Reply records the API's answer to the last send, a second later.
func (j *Job) Reply(o aggregate.Outcome) {
	j.T.Helper()
	j.Now = j.Now.Add(time.Second)
	o.Key, o.Try = j.Key()
	j.Do(o)
}

// Key is the current key and its tries.
func (j *Job) Key() (string, int) {
	cur, _ := j.S.Current()
	return cur.Key, cur.Tries
}

// Result is a search result body with escapes in it.
func Result(id string, pages int) []byte {
	return []byte(fmt.Sprintf(`{"requestId":%q,"organic":[{"position":1,"title":"Caf\u00e9 \"scales\"","link":"https://example.com/"}],"pages":%d}`, id, pages))
}

// SampleLog is six jobs: a plain success (a), an unknown outcome resent
// and answered by a replay (b), a 408 and a new key (c, zero results), a
// lost response that reconciliation finds charged at 23:59 and an operator
// buys again the next day (d), a confirmed failure (e), and a job
// scheduled for two days later (f). Their charges are in SampleLedger.
func SampleLog(t testing.TB) [][]events.Event {
	ids := &IDs{}
	var jobs [][]events.Event

	a := NewJob(t, ids, "espresso scale", T0)
	a.Send()
	a.Reply(aggregate.Outcome{Status: 200, RequestID: "req_a", Result: Result("req_a", 1), Pages: 1})
	jobs = append(jobs, a.Log)

	b := NewJob(t, ids, "milk jug", T0)
	b.Send()
	b.Reply(aggregate.Outcome{Unknown: "timeout"})
	b.Send()
	b.Reply(aggregate.Outcome{Status: 200, RequestID: "req_b", Replayed: true, Result: Result("req_b", 2), Pages: 2})
	jobs = append(jobs, b.Log)

	c := NewJob(t, ids, "tamper", T0.Add(time.Hour))
	c.Send()
	c.Reply(aggregate.Outcome{Status: 408, Code: "search_timeout", RequestID: "req_c1"})
	c.Send()
	c.Reply(aggregate.Outcome{Status: 200, RequestID: "req_c2", Result: Result("req_c2", 0)})
	jobs = append(jobs, c.Log)

	d := NewJob(t, ids, "grinder", T0.Add(9*time.Hour+59*time.Minute)) // 23:59
	d.Send()
	d.Reply(aggregate.Outcome{Status: 409, Code: "idempotency_replay_unavailable", RequestID: "req_d1"})
	key, _ := d.Key()
	d.Do(aggregate.LedgerAnswer{Keys: []string{key}, RequestIDs: []string{"req_d1"}, Entries: []events.LedgerEntry{
		{RequestID: "req_d1", Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: d.Now}}})
	d.Now = d.Now.Add(time.Hour)
	d.Do(aggregate.AuthorizeRepurchase{By: "ops", Reason: "customer needs it"})
	d.Send()
	d.Reply(aggregate.Outcome{Status: 200, RequestID: "req_d2", Result: Result("req_d2", 1), Pages: 1})
	jobs = append(jobs, d.Log)

	e := NewJob(t, ids, "scale\tbattery", T0)
	e.Send()
	e.Reply(aggregate.Outcome{Status: 401, Code: "unauthorized", Message: "bad token", RequestID: "req_e"})
	jobs = append(jobs, e.Log)

	f := NewJob(t, ids, "later", T0.Add(48*time.Hour))
	jobs = append(jobs, f.Log)
	return jobs
}

// SampleLedger is what the provider charged for SampleLog.
func SampleLedger(jobs [][]events.Event) []events.LedgerEntry {
	key := func(job, n int) string { return aggregate.Fold(jobs[job]).Attempts[n].Key }
	return []events.LedgerEntry{
		{RequestID: "req_a", Key: key(0, 0), Pages: 1, BilledPages: 1, AmountMicros: 1000},
		{RequestID: "req_b", Key: key(1, 0), Pages: 2, BilledPages: 2, AmountMicros: 2000},
		{RequestID: "req_d1", Key: key(3, 0), Pages: 1, BilledPages: 1, AmountMicros: 1000},
		{RequestID: "req_d2", Key: key(3, 1), Pages: 1, BilledPages: 1, AmountMicros: 1000},
	}
}

// Interleave puts the jobs' events into one log, round-robin, as a busy
// engine writes them, with stream sequences from 1.
func Interleave(jobs [][]events.Event) []projections.Record {
	var out []projections.Record
	for i := 0; ; i++ {
		more := false
		for _, j := range jobs {
			if i < len(j) {
				out = append(out, projections.Record{Seq: uint64(len(out) + 1), Event: j[i]})
				more = true
			}
		}
		if !more {
			return out
		}
	}
}
