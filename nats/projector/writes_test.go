package projector_test

import (
	"context"
	"sync"
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

// TestABatchWritesEachValueOnce: a runner that finds many events of the
// same jobs waiting folds them in memory and writes each value once, with
// its last fold: one status a job, one job ledger and one key ledger a
// job, one ledger for the day they share.
func TestABatchWritesEachValueOnce(t *testing.T) {
	w := setup(t)
	const jobs = 20
	w.more(jobs, "once") // five events a job, one job after another
	r, _ := w.runner("r1", projector.Config{})
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
	require.EqualValues(t, 1, r.Stats().Batches, "the whole log in one batch")

	ctx := context.Background()
	writes := func(bucket string) uint64 {
		t.Helper()
		st, err := w.srv.JS.Stream(ctx, projector.BucketStream(bucket))
		require.NoError(t, err)
		return st.CachedInfo().State.LastSeq
	}
	require.EqualValues(t, jobs, writes(projections.StatusBucket))
	require.EqualValues(t, jobs, writes(projections.ObservationsBucket))
	require.EqualValues(t, 2*jobs+1, writes(projections.LedgerBucket))
	require.Equal(t, 4*jobs+1, r.Stats().Writes)
}

// TestARunnerDeadMidBatchLeavesTheViewsRight: a runner dies while it
// writes a batch, with some of the batch's values written and others not
// (here: a whole batch written, then two of its values put back as they
// were before it, the day's ledger and a job's status). The runner that
// takes over gets the batch again; it skips the events the written
// values hold and applies them to the others, so every value is the fold
// of the log, each event counted once.
func TestARunnerDeadMidBatchLeavesTheViewsRight(t *testing.T) {
	w := setup(t)
	w.more(10, "first")
	_, stop := w.runner("r1", projector.Config{})
	w.caughtUp()
	stop()
	before := w.contents("")

	w.more(10, "second")
	crashed := make(chan struct{})
	var once sync.Once
	hook := func(uint64) error {
		once.Do(func() { close(crashed) })
		return projector.ErrCrash
	}
	_, stop = w.runner("r2", projector.Config{Hooks: projector.Hooks{AfterWrite: hook}})
	<-crashed
	stop()

	ctx := context.Background()
	day := projections.DayTarget(projectionsT0)
	secondJob := w.recs[len(w.recs)-1].Event.JobID
	require.NotEqual(t, before[day], w.contents("")[day], "the crashed runner wrote the day's ledger")
	ledger, err := w.srv.JS.KeyValue(ctx, projections.LedgerBucket)
	require.NoError(t, err)
	_, err = ledger.PutString(ctx, day.Key, before[day]) // as if not written yet
	require.NoError(t, err)
	status, err := w.srv.JS.KeyValue(ctx, projections.StatusBucket)
	require.NoError(t, err)
	require.NoError(t, status.Delete(ctx, secondJob)) // a job the batch begins: as if not written yet

	w.runner("r3", projector.Config{})
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
	require.Equal(t, 20, decodeDay(t, w.contents("")[day]).Sends, "each send counted once")
}
