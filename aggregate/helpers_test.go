package aggregate_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/stretchr/testify/require"
)

// t0 is the start of every test's clock.
var t0 = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

// seqIDs gives predictable ids: ULIDs and keys numbered in order.
type seqIDs struct{ n uint64 }

func (s *seqIDs) EventID() string {
	s.n++
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(t0))
	var e [10]byte
	binary.BigEndian.PutUint64(e[2:], s.n)
	_ = id.SetEntropy(e[:])
	return id.String()
}

func (s *seqIDs) AttemptKey() string {
	s.n++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", s.n)
}

// job drives one job through Decide and Apply, keeping its whole log.
type job struct {
	t   *testing.T
	d   aggregate.Decider
	s   aggregate.State
	log []events.Event
	ids *seqIDs
	now time.Time
}

// newJob schedules a job with the default policy at t0.
func newJob(t *testing.T) *job {
	t.Helper()
	return newJobWith(t, aggregate.DefaultPolicy())
}

func newJobWith(t *testing.T, p events.RetryPolicy) *job {
	t.Helper()
	j := &job{t: t, d: aggregate.Decider{Table: aggregate.DefaultTable()}, ids: &seqIDs{}, now: t0}
	sched, err := aggregate.NewSchedule(aggregate.ScheduleCommand{
		Slot: t0.Format(time.RFC3339), Query: "espresso scale", Country: "US", Language: "en", Device: "mobile", Limit: aggregate.LimitOf(10),
	}, p, "test")
	require.NoError(t, err)
	j.must(sched)
	return j
}

// try decides one input and applies what it returns.
func (j *job) try(in aggregate.Input) ([]events.Event, error) {
	evs, err := j.d.Decide(j.s, in, j.now, j.ids)
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		_, encErr := events.Encode(e)
		require.NoError(j.t, encErr, "Decide produced an event that cannot be stored")
		j.s = aggregate.Apply(j.s, e)
	}
	j.log = append(j.log, evs...)
	return evs, nil
}

func (j *job) must(in aggregate.Input) []events.Event {
	j.t.Helper()
	evs, err := j.try(in)
	require.NoError(j.t, err)
	return evs
}

// send claims the job as worker w and returns the key and try.
func (j *job) send(w string) (string, int) {
	j.t.Helper()
	evs := j.must(aggregate.Due{Worker: w})
	require.Len(j.t, evs, 1)
	sent, ok := evs[0].Data.(events.Sent)
	require.True(j.t, ok, "expected Sent, got %s", evs[0].Type())
	return sent.Key, sent.Try
}

// waitDue moves the clock to the job's next run time.
func (j *job) waitDue() {
	n := j.s.Next(j.now)
	if n.Step == aggregate.StepWait {
		j.now = n.At
	}
}

func (j *job) key() string {
	a, _ := j.s.Current()
	return a.Key
}

func types(evs []events.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type()
	}
	return out
}

var okResult = []byte(`{"requestId":"req_ok","organic":[{"position":1,"title":"t","link":"https://example.com/"}]}`)

// record appends a hand-made event at the job's next version, as a buggy
// engine would have written it: no decision checks it.
func (j *job) record(d events.Payload) {
	e := events.Event{ID: j.ids.EventID(), JobID: j.s.JobID, Version: uint64(len(j.log) + 1), Time: j.now, Data: d}
	j.log = append(j.log, e)
	j.s = aggregate.Apply(j.s, e)
}

// ruleNames lists the rules of violations, in order.
func ruleNames(v []aggregate.Violation) []string {
	out := make([]string, len(v))
	for i, x := range v {
		out[i] = x.Rule
	}
	return out
}
