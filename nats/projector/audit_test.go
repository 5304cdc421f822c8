package projector_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/audit"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// TestAuditLog: reading the log from JetStream (with a job read again
// after its re-purchase, and a message that is no event) gives the report
// a plain audit of the same histories gives.
func TestAuditLog(t *testing.T) {
	w := setup(t)
	jobs := w.sample()
	ctx := context.Background()
	junk, err := w.srv.JS.Publish(ctx, snats.EventSubjectPrefix+jobs[4][0].JobID, []byte("not an event"))
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
		o.WithoutLedger = c.withoutLedger
		a, err := projector.AuditLog(ctx, w.srv.JS, projector.AuditOptions{Audit: o, Workers: c.workers})
		require.NoError(t, err)
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

	// The same log as a recording, without subjects.
	var msgs []snats.Message
	for _, r := range w.recs {
		msgs = append(msgs, snats.Message{Seq: r.Seq, Data: mustEncode(t, r.Event)})
	}
	a, err := projector.AuditEvents(ctx, msgs, projector.AuditOptions{Audit: opts})
	require.NoError(t, err)
	require.Equal(t, want, a.Report())
}
