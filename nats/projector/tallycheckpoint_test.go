package projector_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// TestResumeTallyFromCheckpoint: an engine that starts resumes counting the log
// from the checkpoint the engines keep in serp_metrics, and ends with the
// totals of one that counted the log from its start; a checkpoint of a log
// made again under the same name is not taken.
func TestResumeTallyFromCheckpoint(t *testing.T) {
	srv, st := eventLog(t)
	ctx := t.Context()
	_, err := srv.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: snats.MetricsBucket, History: 1})
	require.NoError(t, err)
	ids := projectionstest.IDsFrom(0)
	var last uint64
	write := func(from, to int) {
		for i := from; i < to; i++ {
			j := projectionstest.NewJob(t, ids, fmt.Sprintf("kettle %d", i), projectionstest.T0)
			j.Send()
			if i%3 != 0 { // every third job stays in flight
				req := fmt.Sprintf("req_%d", i)
				j.Reply(aggregate.Outcome{Status: 200, RequestID: req, Result: projectionstest.Result(req, 1), Pages: 1})
			}
			v, err := st.Append(ctx, j.S.JobID, 0, j.Log...)
			require.NoError(t, err)
			last = v
		}
	}
	// follow counts the log into tally until it has counted it all.
	follow := func(tally *projections.Tally) func() {
		fctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); projector.FollowTally(fctx, srv.JS, tally, nil) }()
		natstest.WaitFor(t, 10*time.Second, func() error {
			if got := tally.Seq(); got != last {
				return fmt.Errorf("counted up to %d of %d", got, last)
			}
			return nil
		})
		return func() { cancel(); wg.Wait() }
	}

	write(0, 6)
	first := projections.NewTally().ForgetFinished()
	seq, log, err := projector.ResumeTally(ctx, srv.JS, first)
	require.NoError(t, err)
	require.Zero(t, seq, "no checkpoint yet")
	require.False(t, log.IsZero())
	// save writes tally's checkpoint and requires it written or not.
	save := func(tally *projections.Tally, written bool, msgAndArgs ...any) {
		t.Helper()
		saved, err := projector.SaveTallyCheckpoint(ctx, srv.JS, tally, log)
		require.NoError(t, err)
		require.Equal(t, written, saved, msgAndArgs...)
	}
	// resumed is where a fresh tally resumes from the checkpoint.
	resumed := func() uint64 {
		t.Helper()
		seq, _, err := projector.ResumeTally(ctx, srv.JS, projections.NewTally().ForgetFinished())
		require.NoError(t, err)
		return seq
	}
	follow(first)()
	save(first, true)
	save(first, false, "the checkpoint there is as far along")
	at := first.Seq()

	write(6, 12)
	second := projections.NewTally().ForgetFinished()
	seq, _, err = projector.ResumeTally(ctx, srv.JS, second)
	require.NoError(t, err)
	require.Equal(t, at, seq)
	want := first.Counts()
	want.CaughtUp = false // until its reader notes where the log ends
	require.Equal(t, want, second.Counts(), "restored as it was written")
	stop := follow(second)
	stop()
	whole := projections.NewTally().ForgetFinished()
	follow(whole)()
	require.Equal(t, whole.Counts(), second.Counts())
	require.Equal(t, 4, second.Counts().Jobs[aggregate.StatusSending], "the jobs in flight, two of them restored")
	require.Equal(t, whole.Remembered(), second.Remembered())

	// An engine behind does not write over a checkpoint further along.
	save(second, true)
	save(first, false, "a tally behind the checkpoint")
	require.Equal(t, last, resumed())

	// A checkpoint past the log's end is not of this log.
	kv, err := srv.JS.KeyValue(ctx, snats.MetricsBucket)
	require.NoError(t, err)
	e, err := kv.Get(ctx, snats.MetricsCheckpointKey)
	require.NoError(t, err)
	ahead := strings.Replace(string(e.Value()), fmt.Sprintf(`"seq":%d`, last), fmt.Sprintf(`"seq":%d`, last+1), 1)
	require.NotEqual(t, string(e.Value()), ahead)
	_, err = kv.Put(ctx, snats.MetricsCheckpointKey, []byte(ahead))
	require.NoError(t, err)
	_, _, err = projector.ResumeTally(ctx, srv.JS, projections.NewTally().ForgetFinished())
	require.ErrorIs(t, err, projections.ErrTallyCheckpoint)
	require.ErrorContains(t, err, "past the log's end")
	// One no tally could take is written over, even by a tally behind it.
	save(second, true)
	require.Equal(t, last, resumed())
	// So is one of a tally that remembers every job.
	full := projections.NewTally()
	follow(full)()
	save(full, true)
	save(first, true, "the one there is a tally's that remembers every job")

	// The log made again: the checkpoint is of the one before, and a
	// tally that counted the one before writes none over it.
	require.NoError(t, srv.JS.DeleteStream(ctx, snats.EventStream))
	_, err = snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	write(12, 30)
	saved, err := projector.SaveTallyCheckpoint(ctx, srv.JS, second, log)
	require.ErrorContains(t, err, "made again")
	require.False(t, saved)
	fresh := projections.NewTally().ForgetFinished()
	_, newLog, err := projector.ResumeTally(ctx, srv.JS, fresh)
	require.ErrorIs(t, err, projections.ErrTallyCheckpoint)
	require.Zero(t, fresh.Seq())
	require.False(t, newLog.Equal(log))
}

// KeepTallyCheckpoint writes the tally once it has moved, and once more as it
// stops.
func TestKeepTallyCheckpoint(t *testing.T) {
	srv, st := eventLog(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err := srv.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: snats.MetricsBucket, History: 1})
	require.NoError(t, err)
	kv, err := srv.JS.KeyValue(ctx, snats.MetricsBucket)
	require.NoError(t, err)
	tally := projections.NewTally().ForgetFinished()
	from, log, err := projector.ResumeTally(ctx, srv.JS, tally)
	require.NoError(t, err)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Add(2)
	go func() { defer wg.Done(); projector.FollowTally(ctx, srv.JS, tally, nil) }()
	kctx, stopKeeping := context.WithCancel(ctx)
	kept := make(chan struct{})
	go func() {
		defer wg.Done()
		defer close(kept)
		projector.KeepTallyCheckpoint(kctx, srv.JS, tally, log, from, 10*time.Millisecond, nil)
	}()

	j := projectionstest.NewJob(t, projectionstest.IDsFrom(0), "kettle", projectionstest.T0)
	v, err := st.Append(ctx, j.S.JobID, 0, j.Log...)
	require.NoError(t, err)
	restoredAt := func() error {
		fresh := projections.NewTally().ForgetFinished()
		seq, _, err := projector.ResumeTally(ctx, srv.JS, fresh)
		if err != nil {
			return err
		}
		if seq != v {
			return fmt.Errorf("checkpoint at %d, not %d", seq, v)
		}
		return nil
	}
	natstest.WaitFor(t, 10*time.Second, restoredAt)

	// The last one is written on the way out: by a keeper whose first
	// tick is an hour away, stopped at once. It begins after the tally
	// has counted past the checkpoint it says it was restored from, and
	// still writes.
	stopKeeping()
	<-kept
	first := v
	j2 := projectionstest.NewJob(t, projectionstest.IDsFrom(1), "grinder", projectionstest.T0)
	v, err = st.Append(ctx, j2.S.JobID, 0, j2.Log...)
	require.NoError(t, err)
	natstest.WaitFor(t, 10*time.Second, func() error {
		if tally.Seq() != v {
			return fmt.Errorf("counted up to %d of %d", tally.Seq(), v)
		}
		return nil
	})
	require.Error(t, restoredAt(), "not written yet")
	hctx, stopHourly := context.WithCancel(ctx)
	hourly := make(chan struct{})
	go func() {
		defer close(hourly)
		projector.KeepTallyCheckpoint(hctx, srv.JS, tally, log, first, time.Hour, nil)
	}()
	stopHourly()
	<-hourly
	require.NoError(t, restoredAt(), "written on the way out")
	e, err := kv.Get(ctx, snats.MetricsCheckpointKey)
	require.NoError(t, err)
	require.Contains(t, string(e.Value()), fmt.Sprintf(`"format":%d`, projections.TallyCheckpointFormat))
}
