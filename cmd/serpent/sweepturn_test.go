package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/worker"
)

// TestSweepTakesTurns: an engine records its sweeps for lost timers in
// serp_metrics, leaves a periodic sweep to another engine that has just
// begun one, and sweeps again once none has.
func TestSweepTakesTurns(t *testing.T) {
	r := startEngine(t, nil, "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "",
		"--log-level", "debug", "--sweep-every", "300ms", "--name", "engine-a")
	_, js := natstest.Connect(t, r.natsURL)
	ctx := t.Context()
	kv, err := js.KeyValue(ctx, snats.MetricsBucket)
	require.NoError(t, err)
	last := func() worker.SweepRecord {
		var rec worker.SweepRecord
		if e, err := kv.Get(ctx, worker.SweepKey); err == nil {
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
		rec, err := json.Marshal(worker.SweepRecord{Began: time.Now().UTC(), Worker: "engine-b"})
		require.NoError(t, err)
		_, err = kv.Put(ctx, worker.SweepKey, rec)
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
