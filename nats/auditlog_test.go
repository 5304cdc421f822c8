package nats_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// TestAuditLog: reading the log from JetStream (with a job read again
// after its re-purchase, and a message that is no event) gives the report
// a plain audit of the same histories gives.
func TestAuditLog(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	st, err := snats.NewEventStore(ctx, srv.JS, snats.EventStoreOptions{})
	require.NoError(t, err)
	jobs := projectionstest.SampleLog(t)
	version := map[string]uint64{}
	for _, r := range projectionstest.Interleave(jobs) {
		v, err := st.Append(ctx, r.Event.JobID, version[r.Event.JobID], r.Event)
		require.NoError(t, err)
		version[r.Event.JobID] = v
	}
	junk, err := srv.JS.Publish(ctx, snats.EventSubjectPrefix+jobs[4][0].JobID, []byte("not an event"))
	require.NoError(t, err)
	opts := audit.Options{Now: projectionstest.T0.Add(26 * time.Hour)}

	plain := audit.New(opts)
	for _, h := range jobs {
		plain.Add(audit.CheckJob(h, opts), len(h))
	}
	want := plain.Report()

	for _, c := range []struct {
		workers       int
		withoutLedger bool
	}{{1, false}, {3, false}, {3, true}} {
		o := opts
		o.WithoutLedger, o.Workers = c.withoutLedger, c.workers
		var done, total uint64
		log, err := snats.NewAuditLog(ctx, snats.EventLog(srv.JS), c.workers, func(d, t uint64) { done, total = d, t })
		require.NoError(t, err)
		a, err := audit.CheckLog(ctx, log, o)
		require.NoError(t, err)
		require.Equal(t, []uint64{junk.Sequence, junk.Sequence}, []uint64{done, total}, "the progress")
		if !c.withoutLedger { // the jobs as a plain audit learnt them, in their order
			keys, ids := plain.Lookups()
			gotKeys, gotIDs := a.Lookups()
			require.Equal(t, keys, gotKeys)
			require.Equal(t, ids, gotIDs)
		}
		got := a.Report()
		require.Len(t, got.Violations, 1)
		bad := got.Violations[0]
		require.Equal(t, audit.RuleReadable, bad.Rule)
		require.Equal(t, jobs[4][0].JobID, bad.JobID)
		require.Equal(t, junk.Sequence, bad.Seq)
		got.Violations, got.Rules, got.Events = want.Violations, want.Rules, got.Events-1
		require.Equal(t, want, got)
	}
}

// TestAuditLogJobReadShort: a job the audit reads again must come back
// through the last event the audit saw of it; a read that ends before
// (a replica behind answered) is an error, not a shorter history.
func TestAuditLogJobReadShort(t *testing.T) {
	srv := threeMessagesOfAJob(t)
	ctx := context.Background()
	log, err := snats.NewAuditLog(ctx, snats.EventLog(srv.JS), 0, nil)
	require.NoError(t, err)
	got, err := log.Jobs(ctx, map[string]uint64{"job": 3})
	require.NoError(t, err)
	msgs := got["job"]
	require.Len(t, msgs, 3)
	require.Equal(t, "job", msgs[0].JobID, "not events: the job of their subject")
	require.Error(t, msgs[0].Err)
	_, err = log.Jobs(ctx, map[string]uint64{"job": 5})
	require.ErrorContains(t, err, "ended at sequence 3, before 5")
}

// TestRecordedAuditLog: the same log as a recording, without subjects or
// headers, gives the same report.
func TestRecordedAuditLog(t *testing.T) {
	jobs := projectionstest.SampleLog(t)
	opts := audit.Options{Now: projectionstest.T0.Add(26 * time.Hour)}
	plain := audit.New(opts)
	for _, h := range jobs {
		plain.Add(audit.CheckJob(h, opts), len(h))
	}
	var msgs []snats.Message
	for _, r := range projectionstest.Interleave(jobs) {
		b, err := events.Encode(r.Event)
		require.NoError(t, err)
		msgs = append(msgs, snats.Message{Seq: r.Seq, Data: b})
	}
	a, err := audit.CheckLog(context.Background(), snats.RecordedAuditLog(msgs, 2), opts)
	require.NoError(t, err)
	require.Equal(t, plain.Report(), a.Report())
}
