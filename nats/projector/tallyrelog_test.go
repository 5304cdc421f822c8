package projector_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

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

// TestFollowTallyAcrossALogMadeAgain: SERP_EVENTS is deleted and made again
// while an engine's fold follows it. The fold counts the new log from its
// start (as ResumeTally and SaveTallyCheckpoint insist on the log too), not the new
// log's tail on top of the old log's totals, and keeps its checkpoint for
// the new log: whether the new log grows past the old one's end or stays
// short of it, when the fold's reader is sent nothing.
func TestFollowTallyAcrossALogMadeAgain(t *testing.T) {
	for _, fresh := range []int{8, 2} {
		t.Run(fmt.Sprintf("6 jobs, then %d", fresh), func(t *testing.T) { followAcrossALogMadeAgain(t, 6, fresh) })
	}
}

func followAcrossALogMadeAgain(t *testing.T, oldJobs, newJobs int) {
	srv, st := eventLog(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ids := projectionstest.IDsFrom(1)
	job := func(tag string, status int) []events.Event {
		j := projectionstest.NewJob(t, ids, tag, projectionstest.T0)
		j.Send()
		o := aggregate.Outcome{Status: 200, RequestID: "req_" + tag, Result: projectionstest.Result("req_"+tag, 1), Pages: 1}
		if status != 200 {
			o = aggregate.Outcome{Status: status, Code: "unauthorized", RequestID: "req_" + tag}
		}
		j.Reply(o)
		return j.Log
	}
	var last uint64
	for i := range oldJobs { // the old log: failed jobs, one message each
		l := job(fmt.Sprint("old", i), 401)
		v, err := st.Append(ctx, l[0].JobID, 0, l...)
		require.NoError(t, err)
		last = v
	}
	_, err := srv.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: snats.MetricsBucket, History: 1})
	require.NoError(t, err)
	tally := projections.NewTally().ForgetFinished()
	from, log, err := projector.ResumeTally(ctx, srv.JS, tally)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); projector.FollowTally(ctx, srv.JS, tally, nil) }()
	go func() {
		defer wg.Done()
		projector.KeepTallyCheckpoint(ctx, srv.JS, tally, log, from, 10*time.Millisecond, nil)
	}()
	defer wg.Wait()
	defer cancel()
	natstest.WaitFor(t, 10*time.Second, func() error {
		if tally.Seq() < last {
			return fmt.Errorf("at %d of %d", tally.Seq(), last)
		}
		return nil
	})

	// The log is made again under the same name, and jobs bought.
	require.NoError(t, srv.JS.DeleteStream(ctx, snats.EventStream))
	_, err = snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	st2, err := snats.NewEventStore(ctx, srv.JS, snats.EventStoreOptions{})
	require.NoError(t, err)
	fresh := projections.NewTally().ForgetFinished()
	for i := range newJobs {
		l := job(fmt.Sprint("new", i), 200)
		v, err := st2.Append(ctx, l[0].JobID, 0, l...)
		require.NoError(t, err)
		for _, e := range l {
			require.True(t, fresh.Apply(projections.Record{Seq: v, Event: e}))
		}
		last = v
	}
	want := fresh.Counts()
	same := func(got projections.TallyCounts) error {
		if !maps.Equal(got.Jobs, want.Jobs) || got.Purchases != want.Purchases {
			return fmt.Errorf("jobs %v and %d purchases counted, the new log has %v and %d", got.Jobs, got.Purchases, want.Jobs, want.Purchases)
		}
		return nil
	}
	natstest.WaitFor(t, 10*time.Second, func() error { return same(tally.Counts()) })
	require.Equal(t, last, tally.Seq())

	// The checkpoint kept is of the new log, as far as the fold counted.
	natstest.WaitFor(t, 10*time.Second, func() error {
		again := projections.NewTally().ForgetFinished()
		seq, _, err := projector.ResumeTally(ctx, srv.JS, again)
		if err != nil || seq != last {
			return fmt.Errorf("checkpoint at %d, not %d: %v", seq, last, err)
		}
		return same(again.Counts())
	})
}
