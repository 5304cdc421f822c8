package projector

import (
	"context"
	"fmt"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/projections"
	pt "github.com/serpent-engine/serpent/projections/projectionstest"
)

// delivery is a message as the runner's consumer hands it over.
type delivery struct {
	jetstream.Msg
	seq uint64
}

func (d delivery) Metadata() (*jetstream.MsgMetadata, error) {
	return &jetstream.MsgMetadata{Sequence: jetstream.SequencePair{Stream: d.seq}}, nil
}
func (d delivery) Subject() string        { return snats.EventSubjectPrefix + "job" }
func (d delivery) Headers() natsgo.Header { return nil }
func (d delivery) Data() []byte           { return nil }

// TestGapReadShortIsNotAHole: the runner fills a gap in its deliveries
// with direct gets, which a replica behind the leader may answer. On the
// append-only log every sequence in the gap is an event, so an answer
// that is short fails the batch (it is delivered again) instead of
// moving the checkpoint past events never applied.
func TestGapReadShortIsNotAHole(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	r, err := New(ctx, srv.JS, Config{Name: "t"})
	require.NoError(t, err)
	require.True(t, r.wholeLog)
	// A delivery of sequence 5 when 1-4 were not applied, and the stream
	// as this reader sees it holds none of them: the read comes back short.
	r.next = 1
	err = r.applyBatch(ctx, []jetstream.Msg{delivery{seq: 5}})
	require.ErrorContains(t, err, "filling the gap 1..4 read 0 of its 4 events")
	require.EqualValues(t, 1, r.next, "nothing applied")
}

// TestAuditReloadReadShort: a job the audit reads again must come back
// through the last event the audit saw of it; a read that ends before
// (a replica behind answered) is an error, not a shorter history.
func TestAuditReloadReadShort(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	for range 3 {
		_, err := srv.JS.Publish(ctx, snats.EventSubjectPrefix+"job", []byte("{}"))
		require.NoError(t, err)
	}
	_, err = loadJob(ctx, srv.JS, snats.EventStream, snats.EventSubjectPrefix+"job", 3, 3)
	require.NoError(t, err)
	_, err = loadJob(ctx, srv.JS, snats.EventStream, snats.EventSubjectPrefix+"job", 5, 9)
	require.ErrorContains(t, err, "ended at sequence 3, before 5")
}

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
