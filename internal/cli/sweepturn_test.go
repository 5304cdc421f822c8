package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/metrics"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/serper"
)

// TestSweepTakesTurns: an engine records its periodic sweeps for lost
// timers in serp_metrics, leaves one to another engine that has just
// begun one, and sweeps again once none has.
func TestSweepTakesTurns(t *testing.T) {
	t.Parallel()
	r := startEngine(t, nil, "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "",
		"--log-level", "debug", "--sweep-every", "300ms", "--name", "engine-a")
	_, js := natstest.Connect(t, r.natsURL)
	ctx := t.Context()
	kv, err := js.KeyValue(ctx, snats.MetricsBucket)
	require.NoError(t, err)
	last := func() snats.SweepRecord {
		var rec snats.SweepRecord
		if e, err := kv.Get(ctx, snats.MetricsSweepKey); err == nil {
			require.NoError(t, json.Unmarshal(e.Value(), &rec))
		}
		return rec
	}
	natstest.WaitFor(t, 20*time.Second, func() error {
		if rec := last(); rec.Worker != "engine-a" {
			return fmt.Errorf("the last sweep recorded: %+v", rec)
		}
		return nil
	})

	// Another engine, as it were, begins a sweep again and again.
	left := `sweep left to the engine that began one" by=engine-b`
	natstest.WaitFor(t, 20*time.Second, func() error {
		rec, err := json.Marshal(snats.SweepRecord{Began: time.Now().UTC(), Worker: "engine-b"})
		require.NoError(t, err)
		_, err = kv.Put(ctx, snats.MetricsSweepKey, rec)
		require.NoError(t, err)
		if !strings.Contains(r.stderr.String(), left) {
			return fmt.Errorf("no %q yet", left)
		}
		return nil
	})

	// It stops: engine-a's turn comes again.
	natstest.WaitFor(t, 20*time.Second, func() error {
		if rec := last(); rec.Worker != "engine-a" {
			return fmt.Errorf("the last sweep recorded: %+v", rec)
		}
		return nil
	})
}

// noAPI answers nothing: the engine of TestLaggingFoldTakesNoTurn never
// sends.
type noAPI struct{}

func (noAPI) Search(context.Context, string, []byte) serper.Result { return serper.Result{} }
func (noAPI) Ledger(context.Context, serper.LedgerQuery) ([]serper.LedgerEntry, error) {
	return nil, nil
}

// TestLaggingFoldTakesNoTurn: an engine whose metrics' fold is behind the
// log cannot sweep the jobs in flight, so it takes no turn that would make
// the others leave theirs to it: whether its fold never caught up, or
// caught up once and has not moved since.
func TestLaggingFoldTakesNoTurn(t *testing.T) {
	for name, caughtUpOnce := range map[string]bool{"never caught up": false, "caught up once": true} {
		t.Run(name, func(t *testing.T) {
			srv := natstest.RunServer(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
			require.NoError(t, err)
			require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{}, time.Minute))
			st, err := snats.NewEventStore(ctx, srv.JS, snats.EventStoreOptions{})
			require.NoError(t, err)
			eng, err := engine.New(engine.Config{Name: "engine-lag", Store: st, API: noAPI{}, Timers: snats.NewTimers(srv.JS, nil)})
			require.NoError(t, err)
			schedules, err := openSchedules(ctx, srv.JS, snats.NewTimers(srv.JS, nil), time.Now, nil)
			require.NoError(t, err)
			tally := projections.NewTally().ForgetFinished() // told nothing of the log
			if caughtUpOnce {
				tally.CatchUpTo(0) // as on an empty log
			}
			future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
			_, err = eng.Schedule(ctx, []byte(`{"slot":"`+future+`","query":"q","country":"US","language":"en","device":"mobile"}`), "test")
			require.NoError(t, err)

			var out syncBuffer
			mx := metrics.New(metrics.Options{})
			s := &sweeper{eng: eng, schedules: schedules, js: srv.JS, tally: tally, every: 50 * time.Millisecond, now: time.Now,
				mx: mx, log: slog.New(slog.NewTextHandler(&out, nil))}
			done := make(chan struct{})
			go func() {
				defer close(done)
				s.Run(ctx, func() {})
			}()
			behind := func() float64 {
				rec := httptest.NewRecorder()
				mx.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
				return metricValue(rec.Body.String(), `serpent_sweeps_total{outcome="behind"}`)
			}
			// The count, not the log line: a round logs first and counts
			// after, and a round cut short by the end counts nothing.
			natstest.WaitFor(t, 20*time.Second, func() error {
				if n := behind(); n < 3 {
					return fmt.Errorf("%.0f rounds given up", n)
				}
				return nil
			})
			cancel()
			<-done
			require.GreaterOrEqual(t, strings.Count(out.String(), "sweep for lost timers skipped"), 3)
			kv, err := srv.JS.KeyValue(t.Context(), snats.MetricsBucket)
			require.NoError(t, err)
			_, err = kv.Get(t.Context(), snats.MetricsSweepKey)
			require.ErrorIs(t, err, jetstream.ErrKeyNotFound, "a lagging engine recorded a sweep")
			rec := httptest.NewRecorder()
			mx.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			require.Equal(t, -1.0, metricValue(rec.Body.String(), `serpent_sweeps_total{outcome="swept"}`))
		})
	}
}
