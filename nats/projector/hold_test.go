package projector_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// claimed returns a job scheduled and sent (its claim) and the rest of
// its history: the outcome and the observation of a success.
func (w *world) claimed(tag string) (claim, outcome []events.Event) {
	j := projectionstest.NewJob(w.t, w.ids, tag, projectionsT0)
	j.Send()
	n := len(j.Log)
	j.Reply(aggregate.Outcome{Status: 200, RequestID: "req_" + tag, Result: projectionstest.Result("req_"+tag, 1), Pages: 1})
	return j.Log[:n], j.Log[n:]
}

// valuesWritten counts the values ever written to the projection
// buckets: the messages their streams stored.
func (w *world) valuesWritten() int {
	w.t.Helper()
	n := 0
	for _, b := range projections.Buckets() {
		st, err := w.srv.JS.Stream(context.Background(), projector.BucketStream(b))
		require.NoError(w.t, err)
		info, err := st.Info(context.Background())
		require.NoError(w.t, err)
		n += int(info.State.LastSeq)
	}
	return n
}

// TestClaimedJobIsWrittenOnce: a batch that ends with a job claimed (its
// Sent the job's last event) holds the job's records, and when its
// outcome comes with the next batch, the job's status, job ledger and
// key ledger are written once for both. The day ledger, which other jobs
// share, takes the claim at once. With WriteClaims the job's values are
// written with each batch, as before. The values are the fold of the log
// either way.
func TestClaimedJobIsWrittenOnce(t *testing.T) {
	for _, tt := range []struct {
		name        string
		writeClaims bool
		writes      int
	}{
		// status, observation, job ledger, key ledger; the day's twice
		{"held", false, 6},
		// the status and both ledgers twice as well
		{"written with the claim", true, 9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := setup(t)
			claim, outcome := w.claimed("once")
			w.append([][]events.Event{claim})
			var batches atomic.Int32
			appended := make(chan error, 1)
			hook := func(uint64) error {
				if batches.Add(1) == 1 {
					err := w.appendNow(outcome) // the outcome lands while the first batch is written
					appended <- err
					return err
				}
				return nil
			}
			w.runner("r1", projector.Config{WriteClaims: tt.writeClaims, Hooks: projector.Hooks{AfterWrite: hook}})
			select {
			case err := <-appended: // and w.recs holds it from here on
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("the runner wrote no batch")
			}
			w.caughtUp()
			requireEqual(t, w.want(), w.contents(""))
			require.Equal(t, tt.writes, w.valuesWritten())
			require.Equal(t, 1, decodeDay(t, w.contents("")[projections.DayTarget(projectionsT0)]).Sends)
		})
	}
}

// TestHeldClaimIsWrittenWithoutItsOutcome: a claimed job whose outcome
// does not come is written once the runner has held it for HoldFor, and
// the projections catch up with the log.
func TestHeldClaimIsWrittenWithoutItsOutcome(t *testing.T) {
	w := setup(t)
	claim, _ := w.claimed("alone")
	w.append([][]events.Event{claim})
	w.runner("r1", projector.Config{HoldFor: 100 * time.Millisecond})
	w.caughtUp()
	got := w.contents("")
	requireEqual(t, w.want(), got)
	require.Contains(t, got[projections.StatusTarget(claim[0].JobID)], `"status":"sending"`)
}

// TestClaimIsHeldAcrossBatches: a claimed job stays held while other
// jobs' batches are written, until its outcome comes; then its own values
// are written once, for both.
func TestClaimIsHeldAcrossBatches(t *testing.T) {
	w := setup(t)
	claim, outcome := w.claimed("waiting")
	w.append([][]events.Event{claim})
	waiting := projections.StatusTarget(claim[0].JobID)
	status := func(jobID string) error { // read from the runner's goroutine, after it made the bucket
		kv, err := w.srv.JS.KeyValue(context.Background(), projections.StatusBucket)
		if err == nil {
			_, err = kv.Get(context.Background(), jobID)
		}
		return err
	}
	var (
		batches atomic.Int32
		others  = make(chan error, 1)
		done    = make(chan error, 1)
	)
	hook := func(uint64) error {
		switch batches.Add(1) {
		case 1:
			others <- w.appendNow(w.bought("other")) // a finished job, in batches of its own
		default:
			if len(others) > 0 || len(done) > 0 {
				return nil
			}
			other := w.recs[len(w.recs)-1]
			if status(other.Event.JobID) != nil {
				return nil // the other job's status is not written yet
			}
			if err := status(waiting.Key); !errors.Is(err, jetstream.ErrKeyNotFound) {
				done <- fmt.Errorf("the claimed job's status was written before its outcome came (%v)", err)
				return nil
			}
			done <- w.appendNow(outcome)
		}
		return nil
	}
	w.runner("r1", projector.Config{HoldFor: time.Minute, AckWait: 3 * time.Minute, Hooks: projector.Hooks{AfterWrite: hook}})
	select {
	case err := <-others:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the runner wrote no batch")
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the other job was never written")
	}
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
	e, err := w.kv(projections.StatusBucket).Get(context.Background(), waiting.Key)
	require.NoError(t, err)
	require.Contains(t, string(e.Value()), `"status":"succeeded"`)
}

// TestARunnerDiesHoldingAClaim: the acknowledgement floor stays below
// the first held record, so a runner that dies before it writes what it
// held leaves it to the next runner, which folds it once.
func TestARunnerDiesHoldingAClaim(t *testing.T) {
	w := setup(t)
	w.more(1, "done") // a finished job before the claim: acknowledged with the first batch
	claim, _ := w.claimed("held")
	w.append([][]events.Event{claim})
	first := w.recs[len(w.recs)-len(claim)].Seq

	var (
		batches atomic.Int32
		floor   atomic.Uint64
		failed  = make(chan error, 1)
	)
	hook := func(uint64) error {
		if batches.Add(1) == 1 {
			return nil
		}
		// The second batch writes the held claim; the runner dies before
		// it acknowledges it.
		lag, err := projector.ReadLag(context.Background(), w.srv.JS, "", time.Now())
		if err != nil {
			failed <- err
		}
		floor.Store(lag.Applied)
		return projector.ErrCrash
	}
	_, stop := w.runner("first", projector.Config{Hooks: projector.Hooks{AfterWrite: hook}})
	natstest.WaitFor(t, 10*time.Second, func() error {
		if batches.Load() < 2 {
			return errors.New("the held claim is not written yet")
		}
		return nil
	})
	stop()
	require.Empty(t, failed)
	require.Equal(t, first-1, floor.Load(), "the first batch was acknowledged up to the held claim")

	w.runner("second", projector.Config{})
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
	require.Equal(t, 2, decodeDay(t, w.contents("")[projections.DayTarget(projectionsT0)]).Sends, "each send counted once")
}

// TestAStoppingRunnerWritesWhatItHolds: a runner stopped while it holds
// a claim writes it on its way out, rather than leave it to the next
// runner's ack wait.
func TestAStoppingRunnerWritesWhatItHolds(t *testing.T) {
	w := setup(t)
	claim, _ := w.claimed("stopped")
	w.append([][]events.Event{claim})
	// A long hold keeps the claim held until the runner stops.
	r, stop := w.runner("r1", projector.Config{HoldFor: time.Minute, AckWait: 3 * time.Minute})
	natstest.WaitFor(t, 10*time.Second, func() error {
		if r.Stats().Held == 0 {
			return fmt.Errorf("nothing held yet (%d batches)", r.Stats().Batches)
		}
		return nil
	})
	stop()
	w.caughtUp()
	requireEqual(t, w.want(), w.contents(""))
}

// TestHoldingAtEveryBatchBoundary: whichever events a batch ends with,
// held claims leave the values a fold of the log, each event counted
// once (the sample log's unusual paths and finished jobs, cut into
// batches of every size up to a job's length).
func TestHoldingAtEveryBatchBoundary(t *testing.T) {
	for batch := 1; batch <= 8; batch++ {
		t.Run(fmt.Sprint(batch), func(t *testing.T) {
			w := setup(t)
			w.sample()
			w.more(4, "cut")
			w.runner("r1", projector.Config{Batch: batch})
			w.caughtUp()
			requireEqual(t, w.want(), w.contents(""))
		})
	}
}
