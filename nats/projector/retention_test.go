package projector_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// bought is the log of a job bought in one reply.
func (w *world) bought(tag string) []events.Event {
	j := projectionstest.NewJob(w.t, w.ids, tag, projectionstest.T0)
	j.Send()
	j.Reply(aggregate.Outcome{Status: 200, RequestID: "req_" + tag, Result: projectionstest.Result("req_"+tag, 1), Pages: 1})
	return j.Log
}

// appendWithExpiry appends a job's events under an append context that
// makes them leave at expires (never when zero).
func (w *world) appendWithExpiry(evs []events.Event, expires time.Time) {
	w.t.Helper()
	ctx := eventstore.WithExpiry(context.Background(), expires)
	for _, e := range evs {
		v, err := w.store.Append(ctx, e.JobID, w.version[e.JobID], e)
		require.NoError(w.t, err)
		w.version[e.JobID] = v
		w.recs = append(w.recs, projections.Record{Seq: v, Event: e})
	}
}

func (w *world) kv(bucket string) jetstream.KeyValue {
	w.t.Helper()
	b, err := w.srv.JS.KeyValue(context.Background(), bucket)
	require.NoError(w.t, err)
	return b
}

// jobValues are the values of one job in the views.
func jobValues(jobID string) []projections.Target {
	return []projections.Target{projections.StatusTarget(jobID), projections.ObservationTarget(jobID), projections.JobTarget(jobID)}
}

// TestViewsLeaveWithTheirJob: a job appended with an expiry has its
// values in the views until then; they leave with it (per-key TTL), while
// a job without an expiry and the day's ledger stay.
func TestViewsLeaveWithTheirJob(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	leaving, staying := w.bought("leaving"), w.bought("staying")
	w.appendWithExpiry(leaving, time.Now().Add(3*time.Second))
	w.appendWithExpiry(staying, time.Time{})
	w.runner("r1", projector.Config{})
	w.caughtUp()
	gone, stay := leaving[0].JobID, staying[0].JobID
	for _, tg := range jobValues(gone) {
		_, err := w.kv(tg.Bucket).Get(ctx, tg.Key)
		require.NoError(t, err, "%s is in the views before its job leaves", tg)
	}
	for _, tg := range jobValues(gone) {
		natstest.WaitFor(t, 15*time.Second, func() error {
			_, err := w.kv(tg.Bucket).Get(ctx, tg.Key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return nil
			}
			return fmt.Errorf("%s is still in the views (%v)", tg, err)
		})
	}
	for _, tg := range []projections.Target{projections.StatusTarget(stay), projections.ObservationTarget(stay), projections.DayTarget(projectionstest.T0)} {
		_, err := w.kv(tg.Bucket).Get(ctx, tg.Key)
		require.NoError(t, err, "%s stays", tg)
	}
}

// TestRebuiltViewsKeepTheirExpiry: a rebuild's switch writes a job's
// values with the TTL they had in staging, so rebuilt views still leave
// with their job. A live value equal to its staged one but without its
// TTL (written by hand, or before the log had retention) is written again
// with it; the values of a job without an expiry stay without one.
func TestRebuiltViewsKeepTheirExpiry(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	leaving, staying := w.bought("leaving"), w.bought("staying")
	expires := time.Now().Add(time.Hour).Truncate(time.Second)
	w.appendWithExpiry(leaving, expires)
	w.appendWithExpiry(staying, time.Time{})
	_, stop := w.runner("live", projector.Config{})
	w.caughtUp()
	stop()

	gone := leaving[0].JobID
	status := projections.StatusTarget(gone)
	e, err := w.kv(status.Bucket).Get(ctx, status.Key)
	require.NoError(t, err)
	_, err = w.kv(status.Bucket).Put(ctx, status.Key, e.Value()) // same value, no TTL
	require.NoError(t, err)
	obs := projections.ObservationTarget(gone)
	require.NoError(t, w.kv(obs.Bucket).Delete(ctx, obs.Key))

	rep, err := projector.Rebuild(ctx, w.srv.JS, projector.RebuildOptions{LeaseTTL: time.Second})
	require.NoError(t, err)
	require.Equal(t, 2, rep.Written, "the value without its TTL and the lost one")
	requireEqual(t, w.want(), w.contents(""))

	leaves := func(tg projections.Target) time.Time {
		t.Helper()
		h, ok, err := snats.LastHeader(ctx, w.srv.JS, projector.BucketStream(tg.Bucket), "$KV."+tg.Bucket+"."+tg.Key)
		require.NoError(t, err)
		require.True(t, ok, "%s is there", tg)
		if h.Get(eventstore.HeaderTTL) == "" {
			return time.Time{}
		}
		m, err := w.srv.JS.Stream(ctx, projector.BucketStream(tg.Bucket))
		require.NoError(t, err)
		msg, err := m.GetLastMsgForSubject(ctx, "$KV."+tg.Bucket+"."+tg.Key)
		require.NoError(t, err)
		return eventstore.ExpiryOf(msg.Header, msg.Time, true)
	}
	for _, tg := range jobValues(gone) {
		got := leaves(tg)
		require.False(t, got.IsZero(), "%s has a TTL after the rebuild", tg)
		require.WithinDuration(t, expires, got, 4*time.Second, "%s leaves with its job", tg)
		require.False(t, got.After(expires), "%s leaves no later than its job", tg)
	}
	for _, tg := range []projections.Target{projections.StatusTarget(staying[0].JobID), projections.DayTarget(projectionstest.T0)} {
		require.True(t, leaves(tg).IsZero(), "%s stays", tg)
	}
}
