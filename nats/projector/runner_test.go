package projector_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// TestRunnerProjectsTheLog: the buckets hold a fold of the log, and keep
// up as it grows.
func TestRunnerProjectsTheLog(t *testing.T) {
	w := setup(t)
	w.sample()
	r, _ := w.runner("r1", projector.Config{Batch: 7})
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))

	w.more(30, "more")
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))

	lag, err := r.Lag(context.Background())
	require.NoError(t, err)
	require.Zero(t, lag.Pending)
	require.Equal(t, w.recs[len(w.recs)-1].Seq, lag.Applied)
	require.Zero(t, lag.Behind)
	require.Contains(t, lag.Holder, "r1-")
	st := r.Stats()
	require.True(t, st.Holding)
	require.EqualValues(t, len(w.recs), st.Events)
	require.Zero(t, st.Conflicts)
}

// TestRedeliveryDoesNotDoubleCount: a batch written but not acknowledged
// (the runner failed, or crashed, right after its writes) comes again;
// the totals stay exact.
func TestRedeliveryDoesNotDoubleCount(t *testing.T) {
	tests := []struct {
		name string
		fail error
	}{
		{"a failed acknowledgement", errors.New("lost the connection")},
		{"a crash", projector.ErrCrash},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := setup(t)
			w.sample()
			var failed atomic.Int32
			hook := func(uint64) error {
				if failed.Add(1) <= 3 {
					return tt.fail
				}
				return nil
			}
			first, stop := w.runner("first", projector.Config{Batch: 10, Hooks: projector.Hooks{AfterWrite: hook}})
			if errors.Is(tt.fail, projector.ErrCrash) {
				natstest.WaitFor(t, 10*time.Second, func() error {
					if failed.Load() == 0 {
						return errors.New("no batch yet")
					}
					return nil
				})
				stop()
				require.Zero(t, first.Stats().Batches, "the crash left its batch unacknowledged")
				// The crashed runner kept its lease; another takes over once
				// it stands still for a TTL, gets the batch again after the
				// ack wait, and skips what is already applied.
				w.more(5, "after")
				second, _ := w.runner("second", projector.Config{Batch: 10})
				w.caughtUp()
				// The batch begins jobs, so the second runner took their
				// values for absent without reading them; each
				// compare-and-set told it otherwise.
				require.Positive(t, second.Stats().Conflicts)
			}
			w.caughtUp()
			requireEqual(t, w.want(), w.contents(""))
			day := decodeDay(t, w.contents("")[projections.DayTarget(projectionsT0)])
			require.Equal(t, 7+5*boolInt(errors.Is(tt.fail, projector.ErrCrash)), day.Sends, "each send counted once")
		})
	}
}

// TestOnlyOneRunnerApplies: of three runners, one holds the lease and
// applies; when it stops, another takes over.
func TestOnlyOneRunnerApplies(t *testing.T) {
	w := setup(t)
	w.sample()
	type run struct {
		r    *projector.Runner
		stop func()
	}
	var runs []run
	for _, name := range []string{"a", "b", "c"} {
		r, stop := w.runner(name, projector.Config{Batch: 5})
		runs = append(runs, run{r, stop})
	}
	w.caughtUp()
	holders := 0
	var holder run
	for _, x := range runs {
		if st := x.r.Stats(); st.Events > 0 {
			holders++
			holder = x
			require.True(t, st.Holding)
		}
	}
	require.Equal(t, 1, holders, "exactly one runner applied events")

	holder.stop()
	w.more(10, "handover")
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
	applied := 0
	for _, x := range runs {
		if x.r != holder.r && x.r.Stats().Events > 0 {
			applied++
		}
	}
	require.Equal(t, 1, applied, "one other runner took over")
}

// TestAValueChangedBehindTheRunner: a value rewritten by someone else
// (here, with the same bytes) fails the runner's compare-and-set; the
// runner reads it again and the totals stay exact.
func TestAValueChangedBehindTheRunner(t *testing.T) {
	w := setup(t)
	w.more(3, "first")
	r, _ := w.runner("r", projector.Config{})
	w.caughtUp()
	ctx := context.Background()
	day := projections.DayTarget(projectionsT0)
	kv, err := w.srv.JS.KeyValue(ctx, day.Bucket)
	require.NoError(t, err)
	e, err := kv.Get(ctx, day.Key)
	require.NoError(t, err)
	_, err = kv.Put(ctx, day.Key, e.Value())
	require.NoError(t, err)

	w.more(3, "second")
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
	require.Positive(t, r.Stats().Conflicts)
}

// TestRunnerEndsWhenItsConsumerIsGone: with serpent-projections deleted
// every batch fails; the runner used to retry for ever, holding its lease
// (no other runner took over) while the engine looked ready. Run returns
// ErrConsumerGone, and serpent run stops on it.
func TestRunnerEndsWhenItsConsumerIsGone(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	w.more(2, "first")
	r, err := projector.New(ctx, w.srv.JS, projector.Config{Name: "r", LeaseTTL: time.Second, AckWait: time.Second})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	w.caughtUp()
	require.NoError(t, w.srv.JS.DeleteConsumer(ctx, snats.EventStream, projector.Consumer))
	w.more(2, "second")
	select {
	case err := <-done:
		require.ErrorIs(t, err, projector.ErrConsumerGone)
	case <-time.After(30 * time.Second):
		t.Fatal("the runner went on without its consumer")
	}
}

// TestDeletedJobValuesAreFoldedFromTheirHistory: an operator deletes a
// job's status and job ledger (nats kv del); the job's next events make
// the runner fold its whole history again, not those events alone (whose
// value would claim the newest sequence and never be mended).
func TestDeletedJobValuesAreFoldedFromTheirHistory(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	w.more(3, "first")
	j := projectionstest.NewJob(t, w.ids, "later job", projectionstest.T0.Add(10*time.Minute))
	w.append([][]events.Event{j.Log})
	n := len(j.Log)
	w.runner("r", projector.Config{})
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))

	for _, tg := range []projections.Target{projections.StatusTarget(j.Log[0].JobID), projections.JobTarget(j.Log[0].JobID)} {
		kv, err := w.srv.JS.KeyValue(ctx, tg.Bucket)
		require.NoError(t, err)
		require.NoError(t, kv.Delete(ctx, tg.Key))
	}
	j.Send()
	j.Reply(aggregate.Outcome{Status: 200, RequestID: "req_later", Result: projectionstest.Result("req_later", 1), Pages: 1})
	w.append([][]events.Event{j.Log[n:]})
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
}

// TestDeletedKeyLedgerIsFoldedFromItsHistory: as
// TestDeletedJobValuesAreFoldedFromTheirHistory, for an attempt key's
// ledger (key.<key>): the key's next events make the runner fold the
// key's events from its job's history, not those events alone (a value
// without the key's creation and earlier sends, claiming the newest
// sequence).
func TestDeletedKeyLedgerIsFoldedFromItsHistory(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	j := projectionstest.NewJob(t, w.ids, "later job", projectionstest.T0.Add(10*time.Minute))
	j.Send()
	j.Reply(aggregate.Outcome{Unknown: "timeout"})
	w.append([][]events.Event{j.Log})
	n := len(j.Log)
	w.runner("r", projector.Config{})
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))

	key, _ := j.Key()
	tg := projections.KeyTarget(key)
	kv, err := w.srv.JS.KeyValue(ctx, tg.Bucket)
	require.NoError(t, err)
	require.NoError(t, kv.Delete(ctx, tg.Key))
	j.Send() // the same key again, answered by a replay
	j.Reply(aggregate.Outcome{Status: 200, RequestID: "req_later", Replayed: true, Result: projectionstest.Result("req_later", 1), Pages: 1})
	w.append([][]events.Event{j.Log[n:]})
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
}
