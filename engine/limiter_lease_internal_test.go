package engine

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/accounts"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestSlotLastsTheJobsLease: a worker whose limiter holds slots for two
// minutes takes the account's only slot for a job whose claim lease is
// ten, and dies without giving it back. The job's search may run until
// its lease ends, so a second worker finds the slot taken three minutes
// on, and free once the job's lease is over.
func TestSlotLastsTheJobsLease(t *testing.T) {
	ctx := context.Background()
	clk := &budgetClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	srv := natstest.RunServer(t)
	require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{}, time.Second))
	lim := accounts.Limits{MaxInFlight: 1}
	require.NoError(t, SetLimits(ctx, srv.JS, "", lim))
	dead, other := limiterOn(t, srv, "dead", lim, clk), limiterOn(t, srv, "other", lim, clk)

	_, err := dead.Acquire(ctx, Request{JobID: "j1", Lease: 10 * time.Minute, Pages: 1})
	require.NoError(t, err) // never released: its worker died

	clk.add(3 * time.Minute)
	_, err = other.Acquire(ctx, Request{JobID: "j2", Lease: 10 * time.Minute, Pages: 1})
	var throttled *ThrottledError
	require.ErrorAs(t, err, &throttled, "the dead worker's search may still run")

	clk.add(8 * time.Minute)
	p, err := other.Acquire(ctx, Request{JobID: "j2", Lease: 10 * time.Minute, Pages: 1})
	require.NoError(t, err, "the job's lease is over")
	p.release(ctx)
}

// TestDeleteMarkersPurged: every delete of a waiting-jobs value in
// serp_accounts (an engine that stopped, or was swept) leaves a marker;
// the sweep purges those older than markerAge, so the bucket does not
// keep one per engine restart, and never a value written after the
// marker (the bucket's own PurgeDeletes would).
func TestDeleteMarkersPurged(t *testing.T) {
	ctx := context.Background()
	srv := natstest.RunServer(t)
	require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{}, time.Second))
	l, err := NewLimiter(ctx, srv.JS, "w", time.Minute, nil, nil)
	require.NoError(t, err)
	l.Close() // its own sweep done; the test sweeps by hand
	keys := []string{"wait.default.a", "wait.default.b", "wait.default.c"}
	for _, key := range keys {
		_, err := l.kv.Put(ctx, key, []byte(`{}`))
		require.NoError(t, err)
		require.NoError(t, l.kv.Delete(ctx, key))
	}
	stored := func(key string) uint64 {
		st, err := srv.JS.Stream(ctx, "KV_"+snats.AccountsBucket)
		require.NoError(t, err)
		info, err := st.Info(ctx, jetstream.WithSubjectFilter("$KV."+snats.AccountsBucket+"."+key))
		require.NoError(t, err)
		return info.State.Msgs
	}
	require.EqualValues(t, 3, stored("wait.>"), "one marker per deleted value")

	// The markers as a sweep lists them; then an engine named "a" starts
	// again and writes its value before the purge.
	var markers []jetstream.KeyValueEntry
	w, err := l.kv.WatchFiltered(ctx, []string{"wait.>"}, jetstream.MetaOnly())
	require.NoError(t, err)
	for e := range w.Updates() {
		if e == nil {
			break
		}
		markers = append(markers, e)
	}
	require.NoError(t, w.Stop())
	require.Len(t, markers, 3)
	_, err = l.kv.Put(ctx, "wait.default.a", []byte(`{"worker":"a"}`))
	require.NoError(t, err)
	l.purgeMarkers(ctx, markers)
	require.EqualValues(t, 1, stored("wait.>"), "the markers gone, the value written since kept")
	e, err := l.kv.Get(ctx, "wait.default.a")
	require.NoError(t, err)
	require.JSONEq(t, `{"worker":"a"}`, string(e.Value()))

	// The sweep itself: an old marker goes.
	require.NoError(t, l.kv.Delete(ctx, "wait.default.a"))
	l.purgeWaitMarkers(ctx, time.Now().Add(time.Hour)) // every marker counts as old
	require.Zero(t, stored("wait.>"))
}
