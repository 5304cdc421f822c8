package nats_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// takeTurn is worker's SweepTurn.Take at now, for sweeps every every.
func takeTurn(ctx context.Context, kv jetstream.KeyValue, worker string, now time.Time, every time.Duration) (bool, snats.SweepRecord, error) {
	return snats.NewSweepTurn(kv, worker, every, func() time.Time { return now }).Take(ctx)
}

func sweepBucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	srv := natstest.RunServer(t)
	kv, err := srv.JS.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: snats.MetricsBucket, History: 1})
	require.NoError(t, err)
	return kv
}

// TestSweepTurn: engines that sweep every interval take turns: one sweep
// an interval between them. The engine that made the last keeps the turn;
// another takes it once nine tenths of an interval have passed without a
// sweep.
func TestSweepTurn(t *testing.T) {
	kv := sweepBucket(t)
	ctx := context.Background()
	every := 10 * time.Minute
	t0 := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	turn := func(w string, at time.Duration) (bool, snats.SweepRecord) {
		t.Helper()
		mine, last, err := takeTurn(ctx, kv, w, t0.Add(at), every)
		require.NoError(t, err)
		return mine, last
	}

	mine, _ := turn("a", 0)
	require.True(t, mine, "no sweep yet")
	mine, last := turn("b", 5*time.Minute)
	require.False(t, mine, "a swept five minutes ago")
	require.Equal(t, snats.SweepRecord{Began: t0, Worker: "a"}, last)
	mine, _ = turn("a", 6*time.Minute)
	require.True(t, mine, "a made the last sweep: its turn, whatever its clock says")
	mine, _ = turn("b", 14*time.Minute+59*time.Second)
	require.False(t, mine, "not yet nine tenths of the interval since a's last")
	mine, last = turn("b", 15*time.Minute+24*time.Second)
	require.True(t, mine, "nine tenths of the interval since a's last sweep")
	require.Equal(t, "a", last.Worker)
	mine, last = turn("a", 16*time.Minute)
	require.False(t, mine, "b has just swept")
	require.Equal(t, snats.SweepRecord{Began: t0.Add(15*time.Minute + 24*time.Second), Worker: "b"}, last)
	mine, _ = turn("b", 10*time.Minute)
	require.True(t, mine, "b's own record, ahead of b's clock stepped back")
}

// TestSweepTurnOfOneAtOnce: of engines asking at the same moment, one
// sweeps, and the others learn which.
func TestSweepTurnOfOneAtOnce(t *testing.T) {
	kv := sweepBucket(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for round := range 3 {
		at := now.Add(time.Duration(round) * time.Hour)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			mine  []string
			errs  []error
			heard = map[string]int{}
		)
		for _, w := range []string{"a", "b", "c", "d", "e", "f"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, last, err := takeTurn(ctx, kv, w, at, time.Hour)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case ok:
					mine = append(mine, w)
				default:
					heard[last.Worker]++
				}
			}()
		}
		wg.Wait()
		require.Empty(t, errs)
		require.Len(t, mine, 1, "round %d: one engine sweeps", round)
		require.Equal(t, map[string]int{mine[0]: 5}, heard, "round %d: the others hear of its sweep", round)
	}
}

// TestSweepTurnOverAnUnreadableRecord: a record that cannot be read, one
// more than an interval ahead, or a deleted one, counts as no sweep.
func TestSweepTurnOverAnUnreadableRecord(t *testing.T) {
	kv := sweepBucket(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	_, err := kv.Put(ctx, snats.MetricsSweepKey, []byte("not json"))
	require.NoError(t, err)
	mine, _, err := takeTurn(ctx, kv, "a", now, time.Hour)
	require.NoError(t, err)
	require.True(t, mine)

	_, err = kv.Put(ctx, snats.MetricsSweepKey, []byte(`{"began":"2027-12-06T10:00:00Z","worker":"ahead"}`))
	require.NoError(t, err)
	mine, last, err := takeTurn(ctx, kv, "a", now, time.Hour)
	require.NoError(t, err)
	require.True(t, mine, "a record a year ahead is an engine's clock far off")
	require.Equal(t, "ahead", last.Worker)
	mine, _, err = takeTurn(ctx, kv, "b", now.Add(-59*time.Minute), time.Hour)
	require.NoError(t, err)
	require.False(t, mine, "a record less than an interval ahead is an engine's clock a little off")

	require.NoError(t, kv.Delete(ctx, snats.MetricsSweepKey))
	mine, _, err = takeTurn(ctx, kv, "b", now, time.Hour)
	require.NoError(t, err)
	require.True(t, mine)
	mine, last, err = takeTurn(ctx, kv, "c", now, time.Hour)
	require.NoError(t, err)
	require.False(t, mine)
	require.Equal(t, "b", last.Worker)
}

// TestSweepTurnWithoutTheBucket: an error, for the caller to sweep all the
// same.
func TestSweepTurnWithoutTheBucket(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	kv, err := srv.JS.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: snats.MetricsBucket})
	require.NoError(t, err)
	require.NoError(t, srv.JS.DeleteKeyValue(ctx, snats.MetricsBucket))
	mine, _, err := takeTurn(ctx, kv, "a", time.Now(), time.Hour)
	require.Error(t, err)
	require.False(t, mine)
}

// TestLeaveSweepTurn: an engine whose sweep failed gives up its turn, and
// another takes it at once; it does not give up one another engine took.
func TestLeaveSweepTurn(t *testing.T) {
	kv := sweepBucket(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	turn := func(worker string) *snats.SweepTurn {
		return snats.NewSweepTurn(kv, worker, time.Hour, func() time.Time { return now })
	}
	a := turn("a")
	mine, _, err := a.Take(ctx)
	require.NoError(t, err)
	require.True(t, mine)
	require.NoError(t, a.Leave(ctx))
	now = now.Add(time.Minute)
	mine, _, err = turn("b").Take(ctx)
	require.NoError(t, err)
	require.True(t, mine, "a gave its turn up")

	require.NoError(t, a.Leave(ctx))
	now = now.Add(time.Minute)
	mine, last, err := turn("c").Take(ctx)
	require.NoError(t, err)
	require.False(t, mine, "b's turn stays b's")
	require.Equal(t, "b", last.Worker)
	require.NoError(t, turn("nobody").Leave(ctx))
}

// TestSweepTurnOnACluster: on a bucket of three replicas, engines on
// connections of their own asking at once: one sweeps each round, a
// deleted record included.
func TestSweepTurnOnACluster(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	c.WaitReady(t)
	ctx := context.Background()
	_, js := c.Connect(t)
	first, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: snats.MetricsBucket, History: 1, Replicas: 3})
	require.NoError(t, err)
	var kvs []jetstream.KeyValue
	for range 6 {
		_, js := c.Connect(t)
		kv, err := js.KeyValue(ctx, snats.MetricsBucket)
		require.NoError(t, err)
		kvs = append(kvs, kv)
	}
	now := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	for round := range 12 {
		if round%4 == 3 {
			require.NoError(t, first.Delete(ctx, snats.MetricsSweepKey))
		}
		at := now.Add(time.Duration(round) * time.Hour)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			mine int
			errs []error
		)
		for i, kv := range kvs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, _, err := takeTurn(ctx, kv, fmt.Sprint("engine-", i), at, time.Hour)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				} else if ok {
					mine++
				}
			}()
		}
		wg.Wait()
		require.Empty(t, errs, "round %d", round)
		require.Equal(t, 1, mine, "round %d: one engine sweeps", round)
	}
}
