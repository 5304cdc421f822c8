package consume_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/consume"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/recurring"
	"github.com/serpent-engine/serpent/serper/sandbox"
	"github.com/stretchr/testify/require"
)

func espresso(id, expr string) recurring.Definition {
	return recurring.Definition{ID: id, Schedule: expr, Query: "espresso scale " + id, Country: "US", Language: "en", Device: "mobile"}
}

// startFiring runs an engine's workers, intake and schedule firing until
// the returned stop is called.
func (l *live) startFiring(eng *engine.Engine, s *engine.Schedules) (stop func()) {
	stopEngine := l.start(eng, 4)
	ctx, cancel := context.WithCancel(context.Background())
	firing, err := snats.Consumer(ctx, l.srv.JS, snats.WorkStream, snats.ScheduleConsumer)
	require.NoError(l.t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = consume.Firing(ctx, s, firing, consume.Options{}) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); wg.Wait(); stopEngine() }) }
	l.t.Cleanup(stop)
	return stop
}

// newSchedules is the schedules of the server, on timers and the clock
// now (nil: time.Now).
func (l *live) newSchedules(timers engine.ScheduleTimers, now func() time.Time) (*engine.Schedules, error) {
	kv, err := snats.OpenKV(context.Background(), l.srv.JS, snats.SchedulesBucket)
	if err != nil {
		return nil, err
	}
	return engine.NewSchedules(engine.SchedulesConfig{Bucket: kv, Timers: timers, Orders: snats.NewOrders(l.srv.JS),
		MaxPayload: l.srv.Conn.MaxPayload(), Now: now})
}

func (l *live) schedules(now func() time.Time) *engine.Schedules {
	s, err := l.newSchedules(snats.NewTimers(l.srv.JS, now), now)
	require.NoError(l.t, err)
	return s
}

// TestEverySecondAcrossARestart: an @every 1s schedule fires one job per
// slot for a few seconds, with its engine replaced in the middle; no slot
// is ordered twice and, with catch-up, none is lost.
func TestEverySecondAcrossARestart(t *testing.T) {
	t.Parallel()
	l := setupLive(t, sandbox.Faults{})
	ctx := context.Background()
	s := l.schedules(nil)
	def := espresso("every-second", "@every 1s")
	def.CatchUp = recurring.CatchUp{Policy: recurring.CatchUpFire, Limit: 10}
	_, err := s.Create(ctx, def)
	require.NoError(t, err)

	fired := func(n int) func() error {
		return func() error {
			rec, _, err := s.Get(ctx, def.ID)
			if err != nil {
				return err
			}
			if len(rec.State.Recent) < n {
				return fmt.Errorf("%d slots fired", len(rec.State.Recent))
			}
			return nil
		}
	}
	stopA := l.startFiring(l.engine("a", engine.Hooks{}), s)
	natstest.WaitFor(t, 20*time.Second, fired(2))
	stopA()
	l.startFiring(l.engine("b", engine.Hooks{}), l.schedules(nil))
	natstest.WaitFor(t, 20*time.Second, fired(5))

	rec, _, err := s.Get(ctx, def.ID)
	require.NoError(t, err)
	var jobs []string
	for i, f := range rec.State.Recent {
		if i > 0 {
			require.Equal(t, time.Second, f.Slot.Sub(rec.State.Recent[i-1].Slot), "one job per slot, none skipped, none twice")
		}
		jobs = append(jobs, f.JobID)
	}
	states := l.waitTerminal(jobs, 30*time.Second)
	for _, f := range rec.State.Recent {
		require.Equal(t, f.Slot, states[f.JobID].Slot, "each job is its slot")
		require.Equal(t, aggregate.StatusSucceeded, states[f.JobID].Status)
	}
}

// TestScheduleCommandsInOrderOverEngines: two engines share the schedule
// commands; a create then a delete of each of 20 schedules leaves none
// (taken by both engines at once, deletes overtook their creates and were
// refused, and the schedules stayed, buying at every slot).
func TestScheduleCommandsInOrderOverEngines(t *testing.T) {
	l := setupLive(t, sandbox.Faults{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, name := range []string{"a", "b"} {
		eng := l.engine(name, engine.Hooks{})
		cmds, err := snats.Consumer(ctx, l.srv.JS, snats.CommandStream, snats.ScheduleAdminConsumer)
		require.NoError(t, err)
		s := l.schedules(nil)
		l.goRun(func(ctx context.Context) {
			_ = consume.ScheduleCommands(ctx, eng, s, consume.NewRejections(l.srv.JS), cmds, consume.Options{})
		})
	}
	const n = 20
	for i := range n {
		def := fmt.Sprintf(`{"id":"s%02d","schedule":"@hourly","query":"espresso %d","country":"US","language":"en","device":"mobile"}`, i, i)
		_, err := l.srv.JS.Publish(ctx, "serp.cmd.schedules.create", []byte(def))
		require.NoError(t, err)
		_, err = l.srv.JS.Publish(ctx, "serp.cmd.schedules.delete", []byte(fmt.Sprintf("s%02d", i)))
		require.NoError(t, err)
	}
	cons, err := l.srv.JS.Consumer(ctx, snats.CommandStream, snats.ScheduleAdminConsumer)
	require.NoError(t, err)
	natstest.WaitFor(t, 30*time.Second, func() error {
		ci, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if ci.NumPending+uint64(ci.NumAckPending) > 0 {
			return fmt.Errorf("%d commands to go", ci.NumPending+uint64(ci.NumAckPending))
		}
		return nil
	})
	recs, err := l.schedules(nil).List(ctx)
	require.NoError(t, err)
	require.Empty(t, recs, "every schedule was deleted after its create")
	require.Empty(t, l.rejections(), "no delete came before its create")
}

// scheduleCommands counts the commands stored on serp.cmd.schedule.
func (l *live) scheduleCommands() uint64 {
	st, err := l.srv.JS.Stream(context.Background(), snats.CommandStream)
	require.NoError(l.t, err)
	info, err := st.Info(context.Background(), jetstream.WithSubjectFilter(snats.ScheduleSubject))
	require.NoError(l.t, err)
	return info.State.Msgs
}

// jobExists says whether a job has events.
func (l *live) jobExists(id string) bool {
	evs, _, err := l.store.Load(context.Background(), id)
	require.NoError(l.t, err)
	return len(evs) > 0
}

// TestRecreatedScheduleOrdersItsSlot: deleting a schedule and creating it
// again under its id with a corrected search (the only way to change one)
// within the command stream's dedupe window of a slot the old one fired:
// the new command for that slot carried the same message id as the old
// one's (schedule id and slot), was dropped as a duplicate, and the
// schedule recorded a job that never came to be. The message id is now the
// job's, so the same order again is still dropped and another is not.
func TestRecreatedScheduleOrdersItsSlot(t *testing.T) {
	l := setupLive(t, sandbox.Faults{})
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 12, 2, 9, 0, 30, 0, time.UTC)}
	s := l.schedules(c.Now)
	def := espresso("hourly", "@hourly")
	def.Start = c.Now().Add(-3 * time.Hour)
	_, err := s.Create(ctx, def)
	require.NoError(t, err)
	_, err = s.Fire(ctx, def.ID)
	require.NoError(t, err)
	require.EqualValues(t, 1, l.scheduleCommands(), "the 09:00 slot ordered")

	require.NoError(t, s.Delete(ctx, def.ID))
	fixed := def
	fixed.Query = "espresso scale, corrected"
	_, err = s.Create(ctx, fixed)
	require.NoError(t, err)
	plan, err := s.Fire(ctx, def.ID)
	require.NoError(t, err)
	require.Equal(t, []time.Time{time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)}, plan.Fire)
	require.EqualValues(t, 2, l.scheduleCommands(), "the corrected search's 09:00 slot is a command of its own")
	rec, _, err := s.Get(ctx, def.ID)
	require.NoError(t, err)
	job := rec.State.Recent[len(rec.State.Recent)-1].JobID

	l.start(l.engine("a", engine.Hooks{}), 2)
	l.waitSettled(snats.IntakeConsumer)
	require.True(t, l.jobExists(job), "the job the schedule recorded for its slot exists")
}

// TestUnknownScheduleOperationByCommand: a command on
// serp.cmd.schedules.<op> for an operation serpent does not have is
// refused as unknown_subject, whatever its payload.
func TestUnknownScheduleOperationByCommand(t *testing.T) {
	l := setupLive(t, sandbox.Faults{})
	ctx := context.Background()
	s := l.schedules(nil)
	eng := l.engine("a", engine.Hooks{})
	cmds, err := snats.Consumer(ctx, l.srv.JS, snats.CommandStream, snats.ScheduleAdminConsumer)
	require.NoError(t, err)
	l.goRun(func(ctx context.Context) {
		_ = consume.ScheduleCommands(ctx, eng, s, consume.NewRejections(l.srv.JS), cmds, consume.Options{})
	})
	_, err = l.srv.JS.Publish(ctx, snats.ScheduleOpPrefix+"frobnicate", nil)
	require.NoError(t, err)
	l.waitSettled(snats.ScheduleAdminConsumer)
	require.Equal(t, map[string]int{snats.RejectSubjectPrefix + engine.ReasonUnknownSubject: 1}, l.rejections())
}
