package projector_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// TestFollowTallyForgetsFinishedJobs: a tally that lets finished jobs go,
// fed by FollowTally from a real SERP_EVENTS, holds only the jobs in flight,
// and when a finished job comes back (charged without a result, then
// bought again by an operator) it loads the job's events and counts it
// exactly as a tally that remembers every job.
func TestFollowTallyForgetsFinishedJobs(t *testing.T) {
	srv, st := eventLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	forgetful, full := projections.NewTally().ForgetFinished(), projections.NewTally()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for _, tally := range []*projections.Tally{forgetful, full} {
		wg.Add(1)
		go func() { defer wg.Done(); projector.FollowTally(ctx, srv.JS, tally, nil) }()
	}

	// Jobs that finish at once, and the one that comes back.
	ids := projectionstest.IDsFrom(0)
	var seq, version uint64 // the log's last sequence; the last job's version
	done := 0               // events of the last job written
	write := func(j *projectionstest.Job, from int) {
		if from == 0 {
			version = 0
		}
		v, err := st.Append(ctx, j.S.JobID, version, j.Log[from:]...)
		require.NoError(t, err)
		seq, version, done = v, v, len(j.Log)
	}
	for i := range 5 {
		j := projectionstest.NewJob(t, ids, fmt.Sprintf("kettle %d", i), projectionstest.T0)
		j.Send()
		req := fmt.Sprintf("req_ok_%d", i)
		j.Reply(aggregate.Outcome{Status: 200, RequestID: req, Result: projectionstest.Result(req, 1), Pages: 1})
		write(j, 0)
	}
	j := projectionstest.NewJob(t, ids, "grinder", projectionstest.T0)
	j.Send()
	j.Reply(aggregate.Outcome{Status: 409, Code: "idempotency_replay_unavailable", RequestID: "req_1"})
	key, _ := j.Key()
	j.Do(aggregate.LedgerAnswer{Keys: []string{key}, RequestIDs: []string{"req_1"}, Entries: []events.LedgerEntry{
		{RequestID: "req_1", Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: j.Now}}})
	write(j, 0)

	caughtUp := func(want map[aggregate.Status]int, remembered int) {
		t.Helper()
		natstest.WaitFor(t, 10*time.Second, func() error {
			for _, tally := range []*projections.Tally{forgetful, full} {
				if got := tally.Seq(); got != seq {
					return fmt.Errorf("counted up to %d of %d", got, seq)
				}
			}
			return nil
		})
		require.Equal(t, full.Counts(), forgetful.Counts())
		require.Equal(t, want, jobsIn(forgetful.Counts()))
		require.Equal(t, remembered, forgetful.Remembered())
	}
	caughtUp(map[aggregate.Status]int{aggregate.StatusSucceeded: 5, aggregate.StatusChargedNoResult: 1}, 0)
	require.Equal(t, 6, full.Remembered())

	j.Now = j.Now.Add(time.Hour)
	j.Do(aggregate.AuthorizeRepurchase{By: "ops", Reason: "customer needs it"})
	write(j, done)
	caughtUp(map[aggregate.Status]int{aggregate.StatusSucceeded: 5, aggregate.StatusRetrying: 1}, 1)

	j.Send()
	j.Reply(aggregate.Outcome{Status: 200, RequestID: "req_2", Result: projectionstest.Result("req_2", 1), Pages: 1})
	write(j, done)
	caughtUp(map[aggregate.Status]int{aggregate.StatusSucceeded: 6}, 0)
	c := forgetful.Counts()
	require.EqualValues(t, 7, c.Purchases, "five, the charge without a result and the one bought again")
	require.Zero(t, c.DoubleCharges, "a re-purchase an operator authorised is not a double charge")
}

// TestFollowTallyCountsMisplacedEventsAsUndecodable: FollowTally reads the log as
// the projector, the audit and the store do (snats.DecodeEvents): an
// event stored on another job's subject, or under another message id or
// type header, is not an event of the log but a corrupt message
// (serpent_undecodable_events_total, what its alert is there to catch).
// Counted as events, each stray copy of a job's ObservationStored would
// be a second purchase of the job, and would move its state through a
// replay of its history.
func TestFollowTallyCountsMisplacedEventsAsUndecodable(t *testing.T) {
	srv, st := eventLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	ids := projectionstest.IDsFrom(0)
	b := projectionstest.NewJob(t, ids, "kettle", projectionstest.T0)
	b.Send()
	b.Reply(aggregate.Outcome{Status: 200, RequestID: "req_b", Result: projectionstest.Result("req_b", 1), Pages: 1})
	v, err := st.Append(ctx, b.S.JobID, 0, b.Log...)
	require.NoError(t, err)

	// Copies of b's ObservationStored, each under an id of its own.
	stray := func() []byte {
		e := b.Log[len(b.Log)-1]
		e.ID = ids.EventID()
		data, err := events.Encode(e)
		require.NoError(t, err)
		return data
	}
	publish := func(subject string, header natsgo.Header) {
		_, err := srv.JS.PublishMsg(ctx, &natsgo.Msg{Subject: subject, Header: header, Data: stray()})
		require.NoError(t, err)
	}
	publish(snats.EventSubjectPrefix+"fedcba9876543210fedcba9876543210", nil)            // another job's subject
	publish(snats.EventSubjectPrefix+b.S.JobID, natsgo.Header{"Nats-Msg-Id": {"evt_x"}}) // another message id
	publish(snats.EventSubjectPrefix+b.S.JobID, natsgo.Header{events.HeaderType: {"Sent"}})
	last := v + 3

	tally := projections.NewTally().ForgetFinished()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); projector.FollowTally(ctx, srv.JS, tally, nil) }()
	defer wg.Wait()
	defer cancel()
	natstest.WaitFor(t, 10*time.Second, func() error {
		if got := tally.Seq(); got < last {
			return fmt.Errorf("counted up to %d of %d", got, last)
		}
		return nil
	})
	c := tally.Counts()
	require.EqualValues(t, 3, c.Undecodable, "the three misplaced copies")
	require.EqualValues(t, 1, c.Purchases, "one search was bought")
	require.Zero(t, c.DoubleCharges)
	require.Equal(t, map[aggregate.Status]int{aggregate.StatusSucceeded: 1}, jobsIn(c))
}

// TestFollowTallyOfAnEmptyLogIsCaughtUp: on an empty log there is nothing
// to count before the figures are whole: the tally is caught up at once.
func TestFollowTallyOfAnEmptyLogIsCaughtUp(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	tally := projections.NewTally().ForgetFinished()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); projector.FollowTally(ctx, srv.JS, tally, nil) }()
	defer wg.Wait()
	defer cancel()
	natstest.WaitFor(t, 10*time.Second, func() error {
		if !tally.Counts().CaughtUp {
			return fmt.Errorf("not caught up")
		}
		return nil
	})
	require.Zero(t, tally.Counts().Purchases)
}

// TestFollowTallyCatchesUpWhenTheLogsEndIsDeleted: the log's last message
// deleted after FollowTally noted where the log ended is never delivered;
// the message before it, with nothing pending after it, is the end. (The
// engine's SERP_EVENTS denies deletes; an operator's copy of it, or a
// purge, may not.)
func TestFollowTallyCatchesUpWhenTheLogsEndIsDeleted(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{Name: snats.EventStream, Subjects: []string{snats.EventSubjectPrefix + ">"}})
	require.NoError(t, err)
	for range 3 {
		_, err := srv.JS.Publish(ctx, snats.EventSubjectPrefix+"0123456789abcdef0123456789abcdef", []byte(`not an event`))
		require.NoError(t, err)
	}
	tally := projections.NewTally()
	tally.CatchUpTo(3) // what FollowTally notes when it starts
	require.NoError(t, stream.DeleteMsg(ctx, 3))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); projector.FollowTally(ctx, srv.JS, tally, nil) }()
	defer wg.Wait()
	defer cancel()
	natstest.WaitFor(t, 10*time.Second, func() error {
		if c := tally.Counts(); !c.CaughtUp {
			return fmt.Errorf("not caught up at %d", c.Seq)
		}
		return nil
	})
	require.EqualValues(t, 2, tally.Counts().Undecodable)
}
