package projector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/projections"
	pt "github.com/serpent-engine/serpent/projections/projectionstest"
)

// TestRunnerReadsItsConfiguredLog: a runner told to read another stream
// and filter reads the jobs' events there, folds a deleted status from
// its job's history on that stream, and looks its consumer up on that
// stream (it took the events for corrupt, read histories from
// serp.events.<job_id>, and took a deleted consumer for a failed look-up
// on SERP_EVENTS); a rebuild and an audit told the same read the same
// events.
func TestRunnerReadsItsConfiguredLog(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	const stream, prefix = "OTHER_EVENTS", "other.events."
	_, err := srv.JS.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ">"}, AllowDirect: true})
	require.NoError(t, err)
	var recs []projections.Record
	appendLog := func(evs []events.Event) {
		for _, e := range evs {
			b, err := events.Encode(e)
			require.NoError(t, err)
			ack, err := srv.JS.Publish(ctx, prefix+e.JobID, b)
			require.NoError(t, err)
			recs = append(recs, projections.Record{Seq: ack.Sequence, Event: e})
		}
	}
	j := pt.NewJob(t, pt.IDsFrom(1), "q", pt.T0)
	j.Send()
	appendLog(j.Log)
	n := len(j.Log)

	r, err := New(ctx, srv.JS, Config{Name: "r", Stream: stream, Filter: prefix + ">", LeaseTTL: time.Second})
	require.NoError(t, err)
	run, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(run) }()
	t.Cleanup(func() { stop(); <-done })
	caughtUp := func() {
		t.Helper()
		natstest.WaitFor(t, 20*time.Second, func() error {
			lag, err := ReadLag(ctx, srv.JS, stream, time.Now())
			if err != nil {
				return err
			}
			if last := recs[len(recs)-1].Seq; lag.Applied < last || lag.Pending > 0 {
				return fmt.Errorf("applied %d of %d, %d pending (%s)", lag.Applied, last, lag.Pending, r.Stats().LastError)
			}
			return nil
		})
	}
	status := projections.StatusTarget(j.Log[0].JobID)
	requireStatus := func() {
		t.Helper()
		want, err := projections.New(projections.Config{}).Build(recs)
		require.NoError(t, err)
		e, err := r.app.b.kv[status.Bucket].Get(ctx, status.Key)
		require.NoError(t, err)
		require.Equal(t, string(want[status]), string(e.Value()))
	}
	caughtUp()
	requireStatus()

	require.NoError(t, r.app.b.kv[status.Bucket].Delete(ctx, status.Key))
	j.Reply(aggregate.Outcome{Status: 200, RequestID: "req", Result: pt.Result("req", 1), Pages: 1})
	appendLog(j.Log[n:])
	caughtUp()
	requireStatus()

	rep, err := Rebuild(ctx, srv.JS, RebuildOptions{Stream: stream, Filter: prefix + ">", LeaseTTL: time.Second})
	require.NoError(t, err)
	require.EqualValues(t, len(recs), rep.Events)
	require.Zero(t, rep.Written+rep.Deleted, "the rebuild agrees with the runner")
	log, err := snats.NewAuditLog(ctx, snats.NewLog(srv.JS, stream, prefix+">"), 0, nil)
	require.NoError(t, err)
	a, err := audit.CheckLog(ctx, log, audit.Options{Now: pt.T0.Add(26 * time.Hour)})
	require.NoError(t, err)
	report := a.Report()
	require.Empty(t, report.Violations)
	require.EqualValues(t, len(recs), report.Events)

	require.False(t, r.consumerGone(ctx))
	require.NoError(t, srv.JS.DeleteConsumer(ctx, stream, Consumer))
	require.True(t, r.consumerGone(ctx), "the consumer is gone from %s", stream)
}
