package projector_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// TestFewValuesArePlainWrites: a batch that changes many values of a
// bucket writes them as one atomic batch; one that changes a few (a
// runner keeping up with a light load) writes them as plain messages,
// which a single server does not have to stage. Both are the same fold.
func TestFewValuesArePlainWrites(t *testing.T) {
	w := setup(t)
	w.more(40, "many")
	w.runner("r1", projector.Config{})
	w.caughtUp()
	w.more(1, "few")
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))

	ctx := context.Background()
	stream, err := w.srv.JS.Stream(ctx, "KV_"+projections.LedgerBucket)
	require.NoError(t, err)
	// A job's ledger is last written with its key's ledger and the day's.
	batched := func(job string) bool {
		t.Helper()
		m, err := stream.GetLastMsgForSubject(ctx, "$KV."+projections.LedgerBucket+"."+projections.LedgerJobPrefix+job)
		require.NoError(t, err)
		return m.Header.Get("Nats-Batch-Id") != ""
	}
	first, last := w.recs[0].Event.JobID, w.recs[len(w.recs)-1].Event.JobID
	require.True(t, batched(first), "40 jobs' ledgers in one batch are written as an atomic batch")
	require.False(t, batched(last), "a lone job's ledgers are plain writes")
}

// TestIdleRunnerGathersATrickle: events that come one by one to a runner
// with nothing to do are applied as one batch once it has lingered for
// them (Batch bounds the wait here: the runner stops lingering once it
// has a whole batch), and the values are the fold of the log.
func TestIdleRunnerGathersATrickle(t *testing.T) {
	w := setup(t)
	w.more(1, "probe")
	perJob := len(w.recs)
	r, _ := w.runner("r1", projector.Config{Batch: 3 * perJob, Linger: time.Minute})
	w.caughtUp()
	before := r.Stats().Batches

	w.more(3, "trickle") // one event at a time, each its own append
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
	require.Equal(t, before+1, r.Stats().Batches, "the trickle is one batch")
}
