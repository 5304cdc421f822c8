package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/serper"
)

// TestExpiredSlotIsRefused: once a job has left the live log, a command
// for its slot is refused as slot_expired, never made a second job: by
// the engine that ran it, and by another whose clock runs late by less
// than the skew margin. An engine late by more than the margin would
// make the job again: that is what the margin is for.
func TestExpiredSlotIsRefused(t *testing.T) {
	const retention = 30 * 24 * time.Hour
	margin := aggregate.DefaultSkewMargin
	server := &clock{now: t0}
	store := memstore.New(memstore.Options{Now: server.Now})
	api := newAPI(func(string, int) serper.Result { return success("req_1", false) })
	engineAt := func(name string, offset time.Duration) *engine.Engine {
		eng, err := engine.New(engine.Config{Name: name, Store: store, API: api, Timers: &timers{}, Retention: retention,
			Now: func() time.Time { return server.Now().Add(offset) }})
		require.NoError(t, err)
		return eng
	}
	ctx := context.Background()
	a := engineAt("a", 0)
	first, err := a.Schedule(ctx, command, "test")
	require.NoError(t, err)
	require.True(t, first.Created)
	for range 5 {
		next, err := a.Step(ctx, first.JobID, nil)
		require.NoError(t, err)
		if next.Step == aggregate.StepDone {
			break
		}
	}
	s, err := a.State(ctx, first.JobID)
	require.NoError(t, err)
	require.Equal(t, aggregate.StatusSucceeded, s.Status)
	require.Equal(t, t0.Add(retention), s.Expires(), "the job leaves the live log at its slot plus the retention")

	// Past the horizon but still live: a repeat of the command is the job.
	server.Set(s.Expires().Add(-margin / 2))
	repeat, err := a.Schedule(ctx, command, "test")
	require.NoError(t, err)
	require.False(t, repeat.Created)
	require.Equal(t, first.JobID, repeat.JobID)

	server.Set(s.Expires().Add(eventstore.TailDelay + time.Second)) // the job left, head and tail
	evs, _, err := store.Load(ctx, first.JobID)
	require.NoError(t, err)
	require.Empty(t, evs, "the job left the live log")

	for name, offset := range map[string]time.Duration{"the same engine": 0, "an engine late by less than the margin": -margin + time.Hour} {
		_, err := engineAt(name, offset).Schedule(ctx, command, "test")
		var rej *engine.RejectError
		require.ErrorAs(t, err, &rej, name)
		require.Equal(t, engine.ReasonSlotExpired, rej.Reason, name)
		require.Contains(t, rej.Error(), "older than the live log keeps jobs")
	}
	again, err := engineAt("late", -margin-time.Hour).Schedule(ctx, command, "test")
	require.NoError(t, err)
	require.True(t, again.Created, "an engine late by more than the margin would buy the slot again")
	require.Equal(t, 1, api.sends[firstKey(t, api)], "only the first job was bought")
}

// TestHorizonIsAMarginBeforeExpiry: intake refuses a slot a skew margin
// before its job would leave, and takes one just inside.
func TestHorizonIsAMarginBeforeExpiry(t *testing.T) {
	const retention = 10 * 24 * time.Hour
	margin := aggregate.DefaultSkewMargin
	now := t0.Add(retention)
	eng, err := engine.New(engine.Config{Store: memstore.New(memstore.Options{}), API: newAPI(nil), Timers: &timers{},
		Retention: retention, Now: func() time.Time { return now }})
	require.NoError(t, err)
	cmd := func(slot time.Time) []byte {
		return fmt.Appendf(nil, `{"slot":%q,"query":"q","country":"US","language":"en","device":"mobile"}`, slot.Format(time.RFC3339))
	}
	horizon := now.Add(-retention + margin)
	_, err = eng.Schedule(context.Background(), cmd(horizon.Add(-time.Second)), "test")
	var rej *engine.RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, engine.ReasonSlotExpired, rej.Reason)
	_, err = eng.Schedule(context.Background(), cmd(horizon), "test")
	require.NoError(t, err)
}

// TestRetentionMinimum: an engine refuses a retention in which a job
// could outlive its place in the live log.
func TestRetentionMinimum(t *testing.T) {
	p := aggregate.DefaultPolicy()
	min := aggregate.MinRetention(p, aggregate.DefaultSkewMargin)
	require.Equal(t, 5*24*time.Hour, min, "a day's age budget, once more for a re-purchase, three days of margin")
	cfg := engine.Config{Store: memstore.New(memstore.Options{}), API: newAPI(nil), Timers: &timers{}, Retention: min - time.Second}
	_, err := engine.New(cfg)
	require.ErrorContains(t, err, "too short")
	cfg.Retention = min
	_, err = engine.New(cfg)
	require.NoError(t, err)
}

func firstKey(t *testing.T, a *api) string {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	require.Len(t, a.sends, 1)
	for k := range a.sends {
		return k
	}
	return ""
}

// TestRepurchaseTooCloseToLeaving: a re-purchase is refused, with a clear
// error, once its age budget and the skew margin would outlast the job's
// place in the live log; earlier it is taken.
func TestRepurchaseTooCloseToLeaving(t *testing.T) {
	const retention = 10 * 24 * time.Hour
	e := setup(t, func(key string, n int) serper.Result {
		return confirmed(409, "idempotency_replay_unavailable", "req_"+key)
	})
	e.store = memstore.New(memstore.Options{Now: e.clock.Now})
	eng, err := engine.New(engine.Config{Name: "w1", Store: e.store, API: e.api, Timers: e.timers,
		Now: e.clock.Now, ReconcileRetry: time.Minute, Retention: retention})
	require.NoError(t, err)
	job := e.schedule(eng)
	key, _ := e.state(job).Current()
	e.api.charge(key.Key, "req_"+key.Key)
	s := e.runToEnd(eng, job)
	require.Equal(t, aggregate.StatusChargedNoResult, s.Status)

	last := s.Expires().Add(-s.Policy.MaxAge.D() - aggregate.DefaultSkewMargin) // the last moment it may start
	e.clock.Set(last.Add(time.Second))
	_, err = eng.Repurchase(context.Background(), job, "ops", "too late", nil)
	require.ErrorIs(t, err, aggregate.ErrNotAllowed)
	require.ErrorContains(t, err, "leaves the live log at")
	require.Equal(t, aggregate.StatusChargedNoResult, e.state(job).Status, "nothing written")
}

// TestSlotBeforeTheFirstIsRefused: a deployment given a first slot refuses
// earlier ones as before_first_slot, which another deployment runs, and
// takes that slot and later ones. SlotRefused, which a recurring
// schedule's catch-up skips by (TestCatchUpSkipsExpiredSlots), agrees.
func TestSlotBeforeTheFirstIsRefused(t *testing.T) {
	first := t0.Add(time.Hour)
	eng, err := engine.New(engine.Config{Store: memstore.New(memstore.Options{}), API: newAPI(nil), Timers: &timers{},
		FirstSlot: first, Now: func() time.Time { return t0 }})
	require.NoError(t, err)
	cmd := func(slot time.Time) []byte {
		return fmt.Appendf(nil, `{"slot":%q,"query":"q","country":"US","language":"en","device":"mobile"}`, slot.Format(time.RFC3339))
	}
	_, err = eng.Schedule(context.Background(), cmd(first.Add(-time.Second)), "test")
	var rej *engine.RejectError
	require.ErrorAs(t, err, &rej)
	require.Equal(t, engine.ReasonBeforeFirstSlot, rej.Reason)
	require.Contains(t, rej.Error(), "the first slot this deployment takes")
	require.True(t, eng.SlotRefused(first.Add(-time.Second)))

	for _, slot := range []time.Time{first, first.Add(time.Minute)} {
		got, err := eng.Schedule(context.Background(), cmd(slot), "test")
		require.NoError(t, err)
		require.True(t, got.Created)
		require.False(t, eng.SlotRefused(slot))
	}
}
