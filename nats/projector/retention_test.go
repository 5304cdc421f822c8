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
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// TestViewsLeaveWithTheirJob: a job appended with an expiry has its
// values in the views until then; they leave with it (per-key TTL), while
// a job without an expiry and the day's ledger stay.
func TestViewsLeaveWithTheirJob(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	bought := func(tag string) []projections.Record {
		j := projectionstest.NewJob(t, w.ids, tag, projectionstest.T0)
		j.Send()
		j.Reply(aggregate.Outcome{Status: 200, RequestID: "req_" + tag, Result: projectionstest.Result("req_"+tag, 1), Pages: 1})
		var recs []projections.Record
		for _, e := range j.Log {
			recs = append(recs, projections.Record{Event: e})
		}
		return recs
	}
	leaving, staying := bought("leaving"), bought("staying")
	exp := eventstore.WithExpiry(ctx, time.Now().Add(3*time.Second))
	for _, job := range []struct {
		recs []projections.Record
		ctx  context.Context
	}{{leaving, exp}, {staying, ctx}} {
		for _, r := range job.recs {
			v, err := w.store.Append(job.ctx, r.Event.JobID, w.version[r.Event.JobID], r.Event)
			require.NoError(t, err)
			w.version[r.Event.JobID] = v
			w.recs = append(w.recs, projections.Record{Seq: v, Event: r.Event})
		}
	}
	w.runner("r1", projector.Config{})
	w.caughtUp()
	kv := func(bucket string) jetstream.KeyValue {
		b, err := w.srv.JS.KeyValue(ctx, bucket)
		require.NoError(t, err)
		return b
	}
	gone, stay := leaving[0].Event.JobID, staying[0].Event.JobID
	values := []projections.Target{projections.StatusTarget(gone), projections.ObservationTarget(gone), projections.JobTarget(gone)}
	for _, tg := range values {
		_, err := kv(tg.Bucket).Get(ctx, tg.Key)
		require.NoError(t, err, "%s is in the views before its job leaves", tg)
	}
	for _, tg := range values {
		natstest.WaitFor(t, 15*time.Second, func() error {
			_, err := kv(tg.Bucket).Get(ctx, tg.Key)
			if errors.Is(err, jetstream.ErrKeyNotFound) {
				return nil
			}
			return fmt.Errorf("%s is still in the views (%v)", tg, err)
		})
	}
	for _, tg := range []projections.Target{projections.StatusTarget(stay), projections.ObservationTarget(stay), projections.DayTarget(projectionstest.T0)} {
		_, err := kv(tg.Bucket).Get(ctx, tg.Key)
		require.NoError(t, err, "%s stays", tg)
	}
}
