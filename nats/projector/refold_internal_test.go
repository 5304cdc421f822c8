package projector

import (
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/projections"
	pt "github.com/serpent-engine/serpent/projections/projectionstest"
)

// TestRefoldRefusesAShortHistory: a job's status, job ledger or key
// ledger deleted (nats kv del) is folded from the job's history, read with direct gets,
// which a replica behind the leader may answer. A history that does not
// reach the batch's own events of the value fails the batch (it comes
// again) instead of writing the value without them; once the history is
// whole, the value is the fold of the log.
func TestRefoldRefusesAShortHistory(t *testing.T) {
	j := pt.NewJob(t, pt.IDsFrom(1), "q", pt.T0)
	j.Send()
	j.Reply(aggregate.Outcome{Status: 200, RequestID: "req", Result: pt.Result("req", 1), Pages: 1})
	recs := pt.Interleave([][]events.Event{j.Log})
	last := recs[len(recs)-1] // the ObservationStored
	jobID := j.Log[0].JobID
	want, err := projections.New(projections.Config{}).Build(recs)
	require.NoError(t, err)
	upTo := func(stop uint64) func(context.Context, string, uint64) ([]projections.Record, error) {
		return func(_ context.Context, _ string, upTo uint64) ([]projections.Record, error) {
			var out []projections.Record
			for _, r := range recs {
				if r.Seq <= min(upTo, stop) {
					out = append(out, r)
				}
			}
			return out, nil
		}
	}
	key, _ := j.Key()
	for name, tg := range map[string]projections.Target{"status": projections.StatusTarget(jobID),
		"job ledger": projections.JobTarget(jobID), "key ledger": projections.KeyTarget(key)} {
		t.Run(name, func(t *testing.T) {
			srv := natstest.RunServer(t)
			ctx := context.Background()
			b, err := ensureBuckets(ctx, srv.JS, "", 1)
			require.NoError(t, err)
			app := &applier{js: srv.JS, proj: projections.New(projections.Config{}), b: b, cache: newCache(100)}
			require.NoError(t, app.apply(ctx, recs[:len(recs)-1], nil))
			require.NoError(t, b.kv[tg.Bucket].Delete(ctx, tg.Key))
			app.cache.clear()

			app.history = upTo(last.Seq - 1) // a replica one event behind
			err = app.apply(ctx, recs[len(recs)-1:], nil)
			require.ErrorContains(t, err, fmt.Sprintf("before %d", last.Seq))
			_, err = b.kv[tg.Bucket].Get(ctx, tg.Key)
			require.ErrorIs(t, err, jetstream.ErrKeyNotFound, "nothing written from part of the history")

			app.history = upTo(last.Seq)
			require.NoError(t, app.apply(ctx, recs[len(recs)-1:], nil))
			e, err := b.kv[tg.Bucket].Get(ctx, tg.Key)
			require.NoError(t, err)
			require.Equal(t, string(want[tg]), string(e.Value()))
		})
	}
}

// TestBatchesThatBeginAValueReadNoHistory: a fetch boundary may fall
// anywhere, between a job's JobScheduled and its AttemptCreated (whose
// job ledger and key ledger then begin in the next batch), or before a
// KeyRotated (whose key's ledger begins there). Those values cannot exist
// yet: they are written from the batch, without a read of the job's
// history (a replica behind the leader could answer it short, and the
// batch would fail for nothing), and equal the fold of the log.
func TestBatchesThatBeginAValueReadNoHistory(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	b, err := ensureBuckets(ctx, srv.JS, "", 1)
	require.NoError(t, err)
	j := pt.NewJob(t, pt.IDsFrom(1), "q", pt.T0)
	j.Send()
	j.Reply(aggregate.Outcome{Status: 408, Code: "search_timeout", RequestID: "req_1"}) // a new key
	j.Send()
	j.Reply(aggregate.Outcome{Status: 200, RequestID: "req_2", Result: pt.Result("req_2", 1), Pages: 1})
	recs := pt.Interleave([][]events.Event{j.Log})
	rotated := -1
	for i, r := range recs {
		if _, ok := r.Event.Data.(events.KeyRotated); ok {
			rotated = i
		}
	}
	require.Positive(t, rotated)

	app := &applier{js: srv.JS, proj: projections.New(projections.Config{}), b: b, cache: newCache(100)}
	app.history = func(_ context.Context, job string, _ uint64) ([]projections.Record, error) {
		t.Errorf("the history of job %s was read", job)
		return nil, fmt.Errorf("no history here")
	}
	for _, batch := range [][]projections.Record{recs[:1], recs[1:rotated], recs[rotated:]} {
		require.NoError(t, app.apply(ctx, batch, nil))
	}
	want, err := projections.New(projections.Config{}).Build(recs)
	require.NoError(t, err)
	for tg, v := range want {
		e, err := b.kv[tg.Bucket].Get(ctx, tg.Key)
		require.NoError(t, err, "%s", tg)
		require.Equal(t, string(v), string(e.Value()), "%s", tg)
	}
}
