package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/engine/enginetest"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/recurring"
	"github.com/serpent-engine/serpent/serper"
)

func espresso(id, expr string) recurring.Definition {
	return recurring.Definition{ID: id, Schedule: expr, Query: "espresso scale " + id, Country: "US", Language: "en", Device: "mobile"}
}

// schedWorld is what recurring schedules work on, in memory: their
// bucket, their timers and the stream their slots are ordered on.
type schedWorld struct {
	t      *testing.T
	kv     *enginetest.Bucket
	timers *scheduleTimers
	orders *orderLog
}

func newSchedWorld(t *testing.T) *schedWorld {
	return &schedWorld{t: t, kv: enginetest.NewBucket(), timers: &scheduleTimers{}, orders: &orderLog{}}
}

// newSchedules is schedules on the world with timers and the clock now
// (nil: time.Now), interrupted by h if it is not nil.
func (w *schedWorld) newSchedules(timers engine.ScheduleTimers, now func() time.Time, h *hooks) *engine.Schedules {
	var (
		bucket engine.Bucket = w.kv
		orders engine.Orders = w.orders
	)
	if h != nil {
		bucket, orders = &hookBucket{Bucket: bucket, h: h}, &hookOrders{Orders: orders, h: h}
	}
	s, err := engine.NewSchedules(engine.SchedulesConfig{Bucket: bucket, Timers: timers, Orders: orders, Now: now})
	require.NoError(w.t, err)
	return s
}

func (w *schedWorld) schedules(now func() time.Time) *engine.Schedules {
	return w.newSchedules(w.timers, now, nil)
}

// hooked returns schedules interrupted by hooks, and those hooks.
func (w *schedWorld) hooked(now func() time.Time) (*engine.Schedules, *hooks) {
	h := &hooks{}
	return w.newSchedules(w.timers, now, h), h
}

// storeRaw writes a schedule record as it was stored before the checks
// that refuse it now.
func (w *schedWorld) storeRaw(rec engine.Record) {
	data, err := json.Marshal(rec)
	require.NoError(w.t, err)
	require.NoError(w.t, w.kv.Put(context.Background(), rec.Definition.ID, data))
}

// scheduleCommands counts the commands ordered.
func (w *schedWorld) scheduleCommands() int { return w.orders.count() }

// scheduleTimers remember when each schedule is to wake, as its timer or
// its due wake-up in SERP_WORK would.
type scheduleTimers struct {
	mu   sync.Mutex
	when map[string]time.Time
}

func (s *scheduleTimers) ArmSchedule(_ context.Context, id string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.when == nil {
		s.when = map[string]time.Time{}
	}
	s.when[id] = at
	return nil
}

func (s *scheduleTimers) DisarmSchedule(_ context.Context, id string) error {
	s.lose(id)
	return nil
}

func (s *scheduleTimers) ScheduleArmed(_ context.Context, id string) (bool, error) {
	return s.armed(id), nil
}

func (s *scheduleTimers) at(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.when[id]
	return at, ok
}

func (s *scheduleTimers) armed(id string) bool { _, ok := s.at(id); return ok }

// lose forgets a schedule's timer, as a purged work stream would.
func (s *scheduleTimers) lose(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.when, id)
}

// orderLog keeps the commands ordered as the command stream does: an
// order whose id it holds already is dropped as a duplicate (the stream
// drops it within its duplicate window; the tests here run within it).
type orderLog struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (o *orderLog) Order(_ context.Context, cmd []byte, id, _ string) error {
	if _, err := engine.ParseCommand(cmd); err != nil {
		return fmt.Errorf("a schedule ordered a command intake refuses: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ids == nil {
		o.ids = map[string]bool{}
	}
	o.ids[id] = true
	return nil
}

func (o *orderLog) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.ids)
}

// TestCatchUpAfterDowntime: an engine comes back after six missed hourly
// slots; skip orders the latest, fire orders the latest and up to its limit
// of the missed ones.
func TestCatchUpAfterDowntime(t *testing.T) {
	for _, tc := range []struct {
		catchUp recurring.CatchUp
		slots   int
	}{
		{recurring.CatchUp{Policy: recurring.CatchUpSkip}, 1},
		{recurring.CatchUp{Policy: recurring.CatchUpFire, Limit: 3}, 4},
	} {
		t.Run(tc.catchUp.Policy, func(t *testing.T) {
			w := newSchedWorld(t)
			ctx := context.Background()
			c := &clock{now: time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC)}
			s := w.schedules(c.Now)
			def := espresso("hourly", "@hourly")
			def.CatchUp = tc.catchUp
			_, err := s.Create(ctx, def)
			require.NoError(t, err)

			c.Set(time.Date(2026, 12, 2, 14, 10, 0, 0, time.UTC))
			plan, err := s.Fire(ctx, def.ID)
			require.NoError(t, err)
			require.Len(t, plan.Fire, tc.slots)
			require.Equal(t, 6-tc.slots, plan.Skipped)
			require.Equal(t, time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC), plan.Fire[len(plan.Fire)-1])
			again, err := s.Fire(ctx, def.ID)
			require.NoError(t, err)
			require.Empty(t, again.Fire, "a repeated firing orders nothing")

			require.EqualValues(t, tc.slots, w.scheduleCommands(), "one command per fired slot")
			rec, _, err := s.Get(ctx, def.ID)
			require.NoError(t, err)
			require.Equal(t, time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC), rec.State.NextSlot)
		})
	}
}

func TestScheduleOperations(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC)}
	s := w.schedules(c.Now)
	_, err := s.Create(ctx, espresso("a", "0 * * * *"))
	require.NoError(t, err)

	for name, tc := range map[string]struct {
		def  recurring.Definition
		want string
	}{
		"invalid cron":       {espresso("b", "0 25 * * *"), "invalid_schedule"},
		"unknown zone":       {func() recurring.Definition { d := espresso("c", "@daily"); d.TimeZone = "Mars/Olympus"; return d }(), "invalid_time_zone"},
		"the machine's zone": {func() recurring.Definition { d := espresso("c2", "@daily"); d.TimeZone = "Local"; return d }(), "invalid_time_zone"},
		"overlapping": {func() recurring.Definition {
			d := espresso("d", "*/30 * * * *")
			d.Query = "espresso scale a"
			return d
		}(), "overlapping_schedule"},
		"invalid search": {func() recurring.Definition { d := espresso("e", "@daily"); d.Device = "tv"; return d }(), "invalid_schedule"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := s.Create(ctx, tc.def)
			var se *engine.ScheduleError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tc.want, se.Reason)
			require.NotEmpty(t, se.Error())
		})
	}
	_, err = s.Create(ctx, espresso("a", "@daily"))
	require.ErrorIs(t, err, engine.ErrScheduleExists)
	def := `{"id":"f","schedule":"@daily","query":"espresso","country":"US","language":"en","device":"mobile"}`
	for name, payload := range map[string]string{
		"a field twice":       strings.Replace(def, `"query":"espresso"`, `"query":"espresso","query":"milk jug"`, 1),
		"a field in capitals": strings.Replace(def, `"query"`, `"Query"`, 1),
		"data after":          def + "{}",
		// Read as U+FFFD: every slot's command would be refused.
		"half a surrogate pair": strings.Replace(def, `"query":"espresso"`, `"query":"espresso \ud800"`, 1),
		// Inside catch_up too: 50 missed slots, or 3?
		"a nested field twice":       strings.Replace(def, `"device":"mobile"`, `"device":"mobile","catch_up":{"policy":"fire","limit":3,"limit":50}`, 1),
		"a nested field in capitals": strings.Replace(def, `"device":"mobile"`, `"device":"mobile","catch_up":{"policy":"skip","Policy":"fire"}`, 1),
	} {
		_, err := s.ScheduleOp(ctx, "create", []byte(payload))
		var se *engine.ScheduleError
		require.ErrorAs(t, err, &se, name)
		require.Equal(t, engine.ReasonMalformed, se.Reason, name)
	}
	_, err = s.ScheduleOp(ctx, "create", []byte(def))
	require.NoError(t, err)

	rec, err := s.Pause(ctx, "a")
	require.NoError(t, err)
	require.True(t, rec.State.Paused)
	c.Set(time.Date(2026, 12, 2, 11, 10, 0, 0, time.UTC))
	plan, err := s.Fire(ctx, "a")
	require.NoError(t, err)
	require.Empty(t, plan.Fire, "a paused schedule does not fire")
	rec, err = s.Resume(ctx, "a")
	require.NoError(t, err)
	require.False(t, rec.State.Paused)
	require.Equal(t, 3, rec.State.Skipped, "the slots of the pause are skipped")
	require.Equal(t, time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC), rec.State.NextSlot)

	require.NoError(t, s.Delete(ctx, "a"))
	_, _, err = s.Get(ctx, "a")
	require.ErrorIs(t, err, engine.ErrNoSchedule)
	require.ErrorIs(t, s.Delete(ctx, "a"), engine.ErrNoSchedule)
	plan, err = s.Fire(ctx, "a")
	require.NoError(t, err, "a wake-up of a deleted schedule is dropped")
	require.Empty(t, plan.Fire)
	require.NoError(t, s.Delete(ctx, "f"))
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Empty(t, list)
}

// failOnce are schedule timers whose first arm fails, as a NATS timeout
// or a crash between storing a schedule and arming it would.
type failOnce struct {
	engine.ScheduleTimers
	failed bool
}

func (f *failOnce) ArmSchedule(ctx context.Context, id string, at time.Time) error {
	if !f.failed {
		f.failed = true
		return errors.New("nats: timeout")
	}
	return f.ScheduleTimers.ArmSchedule(ctx, id, at)
}

// TestScheduleTimerLostIsArmedAgain: a schedule stored whose timer failed
// to arm is created again by the same create (a retried request or a
// redelivered command), which arms it; another definition under its id is
// still refused. A timer lost later is armed again by the sweep.
func TestScheduleTimerLostIsArmedAgain(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	timers := &failOnce{ScheduleTimers: w.timers}
	s := w.newSchedules(timers, nil, nil)
	def := espresso("hourly", "@hourly")
	_, err := s.Create(ctx, def)
	require.Error(t, err, "the record is stored, its timer is not")
	require.False(t, w.timers.armed(def.ID))

	rec, err := s.Create(ctx, def)
	require.NoError(t, err, "the same create again")
	require.Equal(t, def.ID, rec.Definition.ID)
	require.True(t, w.timers.armed(def.ID))
	other := espresso("hourly", "@daily")
	_, err = s.Create(ctx, other)
	require.ErrorIs(t, err, engine.ErrScheduleExists)

	w.timers.lose(def.ID)
	n, err := s.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.True(t, w.timers.armed(def.ID), "armed again")
	n, err = s.Sweep(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing left to repair")
}

// TestEndedScheduleBlocksNothing: a schedule past its end orders nothing
// more, so a new one for the same search is not refused as overlapping.
func TestEndedScheduleBlocksNothing(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 2, 1, 8, 30, 0, 0, time.UTC)}
	s := w.schedules(c.Now)
	old := espresso("winter", "@hourly")
	old.End = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	_, err := s.Create(ctx, old)
	require.NoError(t, err)
	same := func(id string) recurring.Definition {
		d := espresso(id, "@hourly")
		d.Query = old.Query
		return d
	}
	_, err = s.Create(ctx, same("winter-too"))
	require.Error(t, err, "while it runs, the same search is refused")

	c.Set(time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC))
	_, err = s.Fire(ctx, "winter") // past its end: over
	require.NoError(t, err)
	rec, _, err := s.Get(ctx, "winter")
	require.NoError(t, err)
	require.True(t, rec.State.NextSlot.IsZero())
	_, err = s.Create(ctx, same("spring"))
	require.NoError(t, err)
}

// TestStartInThePast: a schedule whose start is before its creation has
// slots due at once; they are ordered at once, as its catch-up policy says
// (they waited for the next slot, and with skip the last one was lost).
func TestStartInThePast(t *testing.T) {
	for _, tc := range []struct {
		catchUp recurring.CatchUp
		fire    []int // hours of the slots ordered
	}{
		{recurring.CatchUp{Policy: recurring.CatchUpSkip}, []int{10}},
		{recurring.CatchUp{Policy: recurring.CatchUpFire, Limit: 5}, []int{8, 9, 10}},
	} {
		t.Run(tc.catchUp.Policy, func(t *testing.T) {
			w := newSchedWorld(t)
			ctx := context.Background()
			c := &clock{now: time.Date(2026, 12, 2, 10, 30, 0, 0, time.UTC)}
			s := w.schedules(c.Now)
			def := espresso("hourly", "@hourly")
			def.CatchUp = tc.catchUp
			def.Start = time.Date(2026, 12, 2, 7, 30, 0, 0, time.UTC)
			rec, err := s.Create(ctx, def)
			require.NoError(t, err)
			require.False(t, rec.State.NextSlot.After(c.Now()), "due now, not at 11:00: %v", rec.State.NextSlot)

			plan, err := s.Fire(ctx, def.ID)
			require.NoError(t, err)
			var hours []int
			for _, slot := range plan.Fire {
				hours = append(hours, slot.Hour())
			}
			require.Equal(t, tc.fire, hours)
			rec, _, err = s.Get(ctx, def.ID)
			require.NoError(t, err)
			require.Equal(t, time.Date(2026, 12, 2, 11, 0, 0, 0, time.UTC), rec.State.NextSlot)
		})
	}
}

// TestListPagesFitAMessage: a page of schedules stops short of what one
// NATS message holds (100 schedules with 2 KB queries of characters JSON
// escapes are some 1.2 MB), and paging until an empty page lists them all.
func TestListPagesFitAMessage(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	s := w.schedules(nil)
	for i := range 100 {
		d := espresso(fmt.Sprintf("s%03d", i), "0 0 1 1 *")
		d.Query = fmt.Sprintf("%03d ", i) + strings.Repeat("&", 2000)
		d.Start = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
		_, err := s.Create(ctx, d)
		require.NoError(t, err)
	}
	var all []engine.Record
	pages := 0
	for after := ""; ; pages++ {
		page, err := s.ListPage(ctx, after, 100)
		require.NoError(t, err)
		b, err := json.Marshal(page)
		require.NoError(t, err)
		require.Less(t, len(b), 1<<20, "page %d fits a message of the server's default size", pages)
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		after = page[len(page)-1].Definition.ID
	}
	require.Len(t, all, 100)
	require.Greater(t, pages, 1, "more than one page")
	for i, r := range all {
		require.Equal(t, fmt.Sprintf("s%03d", i), r.Definition.ID)
	}
}

// TestStoredScheduleOutlivesNewChecks: a schedule stored under earlier
// checks (an end before its first slot, refused for new definitions now)
// can still be fired, paused, resumed and deleted: a stored definition is
// read back with its zone and expression only, not checked as a new one.
func TestStoredScheduleOutlivesNewChecks(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC)}
	s := w.schedules(c.Now)
	def := espresso("ended-at-birth", "@hourly")
	def.TimeZone, def.CatchUp.Policy = "UTC", recurring.CatchUpSkip
	def.End = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	w.storeRaw(engine.Record{Definition: def, State: recurring.State{Created: c.Now()}})

	_, err := s.Fire(ctx, def.ID)
	require.NoError(t, err)
	rec, err := s.Pause(ctx, def.ID)
	require.NoError(t, err)
	require.True(t, rec.State.Paused)
	_, err = s.Resume(ctx, def.ID)
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, def.ID))
}

// TestZonesThatNameNoPlaceRefused: "Local" and "localtime" are the
// machine's zone (engines, or one after a restart, could disagree on every
// slot), "posixrules" is whatever zone a packager linked it to and
// "Factory" is no zone at all: all load, all are refused like an unknown
// zone. A schedule stored in one before this check keeps firing.
func TestZonesThatNameNoPlaceRefused(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC)}
	s := w.schedules(c.Now)
	for _, zone := range []string{"Local", "localtime", "posixrules", "Factory"} {
		d := espresso("z", "@daily")
		d.TimeZone = zone
		_, err := s.Create(ctx, d)
		var se *engine.ScheduleError
		require.ErrorAs(t, err, &se, zone)
		require.Equal(t, "invalid_time_zone", se.Reason, zone)
		require.ErrorContains(t, err, "unknown time zone", zone)
	}

	old := espresso("old", "@hourly")
	old.TimeZone, old.CatchUp.Policy = "localtime", recurring.CatchUpSkip
	w.storeRaw(engine.Record{Definition: old, State: recurring.State{Created: c.Now()}})
	c.Set(time.Date(2026, 12, 2, 10, 0, 1, 0, time.UTC)) // a slot has come, whatever this machine's offset
	plan, err := s.Fire(ctx, old.ID)
	require.NoError(t, err)
	require.Len(t, plan.Fire, 1, "the stored schedule fires its slot")
}

// TestScheduleOfAnUnknownAccountRefused: a definition naming an API account
// the engine does not have is refused at create as invalid_account, by the
// engine's own check; it was stored, and intake then refused the command
// of every slot it fired, as invalid_account too. The default account,
// named or not, and a configured one are taken.
func TestScheduleOfAnUnknownAccountRefused(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	api := newAPI(func(string, int) serper.Result { return success("r", false) })
	eng, err := engine.New(engine.Config{Name: "a", Store: memstore.New(memstore.Options{}), API: api,
		Accounts: map[string]engine.API{"default": api, "team-b": api}, Timers: &timers{}})
	require.NoError(t, err)
	s := w.schedules(nil)
	s.CheckAccountsWith(eng.CheckAccount)

	d := espresso("acme", "@hourly")
	d.Account = "acme"
	_, err = s.Create(ctx, d)
	var se *engine.ScheduleError
	require.ErrorAs(t, err, &se, "an account the engine does not have")
	require.Equal(t, "invalid_account", se.Reason)
	require.ErrorContains(t, err, `"acme" is not an account of this engine`)
	_, _, err = s.Get(ctx, d.ID)
	require.ErrorIs(t, err, engine.ErrNoSchedule, "nothing stored")

	for _, acct := range []string{"", "default", "team-b"} {
		d := espresso("acct-"+acct, "@hourly")
		d.Account = acct
		_, err := s.Create(ctx, d)
		require.NoError(t, err, "account %q", acct)
	}
}

// TestScheduleOpPayloadsReadStrictly: the id of pause, resume, delete and
// get, and a list page, are read as strictly as definitions: an id named
// twice (which schedule was meant? the last one was deleted), in another
// case, beside an unknown field or followed by more data is malformed,
// and nothing is done. An operation serpent does not have is refused as
// unknown_subject before its payload is read (an empty one was refused
// as "a schedule id is required").
func TestScheduleOpPayloadsReadStrictly(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	s := w.schedules(nil)
	for _, id := range []string{"keep", "drop"} {
		_, err := s.Create(ctx, espresso(id, "@hourly"))
		require.NoError(t, err)
	}
	for op, payload := range map[string]string{
		"delete": `{"id":"keep","id":"drop"}`,
		"pause":  `{"ID":"drop"}`,
		"resume": `{"id":"drop","force":true}`,
		"get":    `{"id":"drop"}{"id":"keep"}`,
		"list":   `{"after":"a","after":"keep"}`,
	} {
		_, err := s.ScheduleOp(ctx, op, []byte(payload))
		var se *engine.ScheduleError
		require.ErrorAs(t, err, &se, "%s %s", op, payload)
		require.Equal(t, engine.ReasonMalformed, se.Reason, "%s %s", op, payload)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2, "nothing deleted")
	for _, r := range list {
		require.False(t, r.State.Paused, "nothing paused")
	}
	for _, payload := range []string{`drop`, ` {"id":"drop"} `} {
		rec, err := s.ScheduleOp(ctx, "get", []byte(payload))
		require.NoError(t, err, payload)
		require.Equal(t, "drop", rec.(engine.Record).Definition.ID)
	}

	for _, payload := range []string{"", "keep"} {
		_, err := s.ScheduleOp(ctx, "frobnicate", []byte(payload))
		var se *engine.ScheduleError
		require.ErrorAs(t, err, &se, payload)
		require.Equal(t, engine.ReasonUnknownSubject, se.Reason, payload)
		require.ErrorContains(t, err, `unknown schedule operation "frobnicate"`)
	}
}

// hooks interrupt the schedules' commands and writes of their bucket:
// beforeOrder runs before each command is published on
// serp.cmd.schedule, beforeStore before a record is first stored
// (Create), beforeWrite before each compare-and-set write of a record,
// beforeClaim before each write of a claim on a search ("create",
// "update" or "delete"); an error one returns is the publish's or
// write's.
type hooks struct {
	beforeOrder func() error
	beforeStore func() error
	beforeWrite func() error
	beforeClaim func(op string) error
}

// before runs the hook for a write of key.
func (h *hooks) before(op, key string) error {
	switch claim := strings.HasPrefix(key, "body."); {
	case claim && h.beforeClaim != nil:
		return h.beforeClaim(op)
	case !claim && op == "create" && h.beforeStore != nil:
		return h.beforeStore()
	case !claim && op == "update" && h.beforeWrite != nil:
		return h.beforeWrite()
	}
	return nil
}

// hookBucket is the schedules' bucket with hooks before its writes.
type hookBucket struct {
	engine.Bucket
	h *hooks
}

func (b *hookBucket) Write(ctx context.Context, key string, value []byte, rev uint64) (uint64, bool, error) {
	op := "update"
	if rev == 0 {
		op = "create"
	}
	if err := b.h.before(op, key); err != nil {
		return 0, false, err
	}
	return b.Bucket.Write(ctx, key, value, rev)
}

func (b *hookBucket) Delete(ctx context.Context, key string, rev uint64) (bool, error) {
	if err := b.h.before("delete", key); err != nil {
		return false, err
	}
	return b.Bucket.Delete(ctx, key, rev)
}

// hookOrders are the schedules' orders with a hook before each.
type hookOrders struct {
	engine.Orders
	h *hooks
}

func (o *hookOrders) Order(ctx context.Context, cmd []byte, id, schedule string) error {
	if o.h.beforeOrder != nil {
		if err := o.h.beforeOrder(); err != nil {
			return err
		}
	}
	return o.Orders.Order(ctx, cmd, id, schedule)
}

// once runs f the first time it is called, and returns nil after.
func once(f func() error) func() error {
	var o sync.Once
	return func() error {
		var err error
		o.Do(func() { err = f() })
		return err
	}
}

// TestPauseOrDeleteRacingAFiring: a pause or a delete that lands while a
// firing is under way. The firing published its commands before its
// compare-and-set write: a pause that won the write left a job bought but
// missing from the schedule's history, and a delete that won it had a
// command published after Delete returned. Now the firing records its
// slots first and publishes them after: what wins the write decides.
func TestPauseOrDeleteRacingAFiring(t *testing.T) {
	slot := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	setup := func(t *testing.T) (*schedWorld, *clock, *engine.Schedules, *engine.Schedules, *hooks) {
		w := newSchedWorld(t)
		c := &clock{now: time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC)}
		s, h := w.hooked(c.Now)
		_, err := s.Create(context.Background(), espresso("hourly", "@hourly"))
		require.NoError(t, err)
		c.Set(slot.Add(time.Second))
		return w, c, s, w.schedules(c.Now), h
	}
	ctx := context.Background()

	t.Run("a pause before the firing's write", func(t *testing.T) {
		w, c, s, other, h := setup(t)
		h.beforeWrite = once(func() error { _, err := other.Pause(ctx, "hourly"); return err })
		plan, err := s.Fire(ctx, "hourly")
		require.NoError(t, err)
		require.Empty(t, plan.Fire)
		require.Zero(t, w.scheduleCommands(), "nothing ordered for a paused schedule")
		rec, _, err := s.Get(ctx, "hourly")
		require.NoError(t, err)
		require.Empty(t, rec.State.Recent)
		require.Empty(t, rec.State.Pending)

		c.Add(time.Minute)
		rec, err = other.Resume(ctx, "hourly")
		require.NoError(t, err)
		require.Len(t, rec.State.Recent, 1, "due before the pause: ordered when it resumes")
		require.Equal(t, slot, rec.State.Recent[0].Slot)
		require.EqualValues(t, 1, w.scheduleCommands())
		require.Zero(t, rec.State.Skipped)
	})
	t.Run("a pause after the firing's write", func(t *testing.T) {
		w, _, s, other, h := setup(t)
		h.beforeOrder = once(func() error { _, err := other.Pause(ctx, "hourly"); return err })
		plan, err := s.Fire(ctx, "hourly")
		require.NoError(t, err)
		require.Equal(t, []time.Time{slot}, plan.Fire)
		require.EqualValues(t, 1, w.scheduleCommands(), "decided before the pause: ordered")
		rec, err := other.Resume(ctx, "hourly")
		require.NoError(t, err)
		require.Len(t, rec.State.Recent, 1, "the slot ordered is in the history")
		require.Equal(t, slot, rec.State.Recent[0].Slot)
		require.Empty(t, rec.State.Pending)
		require.Zero(t, rec.State.Skipped, "the slot ordered is not counted as skipped")
	})
	t.Run("a delete before the firing's write", func(t *testing.T) {
		w, _, s, other, h := setup(t)
		h.beforeWrite = once(func() error { return other.Delete(ctx, "hourly") })
		plan, err := s.Fire(ctx, "hourly")
		require.NoError(t, err)
		require.Empty(t, plan.Fire)
		require.Zero(t, w.scheduleCommands(), "nothing ordered for a deleted schedule")
	})
	t.Run("a delete after the firing's write", func(t *testing.T) {
		w, _, s, other, h := setup(t)
		var atDelete int
		h.beforeOrder = once(func() error {
			err := other.Delete(ctx, "hourly")
			atDelete = w.scheduleCommands()
			return err
		})
		_, err := s.Fire(ctx, "hourly")
		require.NoError(t, err)
		require.EqualValues(t, 1, atDelete, "the slot recorded before the delete is ordered by the time it returns")
		require.EqualValues(t, 1, w.scheduleCommands(), "nothing more after it: the firing's copy is the same command")
	})
}

// TestFiringStoppedHalfwayLosesNoSlot: a firing that stops after recording
// its slot, before its command is published, leaves it pending; the
// wake-up delivered again publishes it first. One that stops after
// publishing, before the pending list is cleared, publishes it again as
// the same command. A paused schedule left with pending slots and no
// wake-up is woken by the sweep.
func TestFiringStoppedHalfwayLosesNoSlot(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC)}
	s, h := w.hooked(c.Now)
	_, err := s.Create(ctx, espresso("hourly", "@hourly"))
	require.NoError(t, err)
	crash := errors.New("the process stops here")

	c.Set(time.Date(2026, 12, 2, 9, 0, 1, 0, time.UTC))
	h.beforeOrder = once(func() error { return crash })
	_, err = s.Fire(ctx, "hourly")
	require.ErrorIs(t, err, crash)
	require.Zero(t, w.scheduleCommands())
	rec, _, err := s.Get(ctx, "hourly")
	require.NoError(t, err)
	require.Len(t, rec.State.Pending, 1, "recorded, not yet ordered")
	plan, err := s.Fire(ctx, "hourly")
	require.NoError(t, err)
	require.Empty(t, plan.Fire, "nothing new is due")
	require.EqualValues(t, 1, w.scheduleCommands(), "the pending slot is ordered")
	rec, _, err = s.Get(ctx, "hourly")
	require.NoError(t, err)
	require.Empty(t, rec.State.Pending)

	c.Set(time.Date(2026, 12, 2, 10, 0, 1, 0, time.UTC))
	writes := 0
	h.beforeWrite = func() error {
		if writes++; writes == 2 { // the write that clears the pending list
			return crash
		}
		return nil
	}
	_, err = s.Fire(ctx, "hourly")
	require.ErrorIs(t, err, crash)
	require.EqualValues(t, 2, w.scheduleCommands())
	_, err = s.Fire(ctx, "hourly")
	require.NoError(t, err)
	require.EqualValues(t, 2, w.scheduleCommands(), "published again: the same command, dropped as a duplicate")
	h.beforeWrite = nil

	c.Set(time.Date(2026, 12, 2, 11, 0, 1, 0, time.UTC))
	h.beforeOrder = once(func() error { return crash })
	_, err = s.Fire(ctx, "hourly")
	require.ErrorIs(t, err, crash)
	_, err = w.schedules(c.Now).Pause(ctx, "hourly")
	require.NoError(t, err)
	w.timers.lose("hourly")
	n, err := s.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a paused schedule with a pending slot is woken")
	at, armed := w.timers.at("hourly")
	require.True(t, armed)
	require.False(t, at.After(c.Now()), "woken at once")
	_, err = s.Fire(ctx, "hourly")
	require.NoError(t, err)
	require.EqualValues(t, 3, w.scheduleCommands(), "the slot recorded before the pause is ordered")
}

// TestResumeCatchesUpSlotsMissedBeforeThePause: slots missed before a pause
// (no engine ran from 08:30; paused at 11:10) are caught up on resume as
// the catch-up policy says after a downtime, and only the slots that came
// while it was paused are skipped; resume skipped them all, so with fire
// a short pause after a downtime lost every missed slot. A schedule paused
// before the pause's time was recorded skips them all, as it did.
func TestResumeCatchesUpSlotsMissedBeforeThePause(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, 12, 2, h, m, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name    string
		catchUp recurring.CatchUp
		resume  time.Time
		ordered []time.Time
		skipped int
	}{
		{"fire, a second's pause", recurring.CatchUp{Policy: recurring.CatchUpFire, Limit: 5}, at(11, 10).Add(time.Second),
			[]time.Time{at(9, 0), at(10, 0), at(11, 0)}, 0},
		{"fire, a long pause", recurring.CatchUp{Policy: recurring.CatchUpFire, Limit: 5}, at(14, 30),
			[]time.Time{at(9, 0), at(10, 0), at(11, 0)}, 3},
		{"skip, a long pause", recurring.CatchUp{Policy: recurring.CatchUpSkip}, at(14, 30),
			[]time.Time{at(11, 0)}, 2 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newSchedWorld(t)
			ctx := context.Background()
			c := &clock{now: at(8, 30)}
			s := w.schedules(c.Now)
			def := espresso("hourly", "@hourly")
			def.CatchUp = tc.catchUp
			_, err := s.Create(ctx, def)
			require.NoError(t, err)
			c.Set(at(11, 10)) // down since 08:30: 09, 10 and 11 missed
			_, err = s.Pause(ctx, def.ID)
			require.NoError(t, err)
			c.Set(tc.resume)
			rec, err := s.Resume(ctx, def.ID)
			require.NoError(t, err)

			var ordered []time.Time
			for _, f := range rec.State.Recent {
				ordered = append(ordered, f.Slot)
			}
			require.Equal(t, tc.ordered, ordered, "the slots before the pause, as the catch-up policy says")
			require.EqualValues(t, len(tc.ordered), w.scheduleCommands(), "and their commands")
			require.Equal(t, tc.skipped, rec.State.Skipped)
			require.Empty(t, rec.State.Pending)
			require.True(t, rec.State.PausedAt.IsZero())
			require.Equal(t, tc.resume.Truncate(time.Hour).Add(time.Hour), rec.State.NextSlot)
			plan, err := s.Fire(ctx, def.ID)
			require.NoError(t, err)
			require.Empty(t, plan.Fire, "nothing more is due")
		})
	}

	t.Run("paused before the pause's time was kept", func(t *testing.T) {
		w := newSchedWorld(t)
		ctx := context.Background()
		c := &clock{now: at(11, 10)}
		s := w.schedules(c.Now)
		def := espresso("hourly", "@hourly")
		def.TimeZone, def.CatchUp = "UTC", recurring.CatchUp{Policy: recurring.CatchUpFire, Limit: 5}
		w.storeRaw(engine.Record{Definition: def, State: recurring.State{Created: at(8, 30), Paused: true}})
		rec, err := s.Resume(ctx, def.ID)
		require.NoError(t, err)
		require.Empty(t, rec.State.Recent)
		require.Equal(t, 3, rec.State.Skipped)
		require.Zero(t, w.scheduleCommands())
	})
}

// rendezvous holds the first two callers of each stage until both are
// there; later callers pass.
type rendezvous struct {
	t    *testing.T
	mu   sync.Mutex
	seen map[string]int
	both map[string]chan struct{}
}

func (r *rendezvous) meet(stage string) error {
	r.mu.Lock()
	if r.seen == nil {
		r.seen, r.both = map[string]int{}, map[string]chan struct{}{}
	}
	r.seen[stage]++
	n := r.seen[stage]
	if r.both[stage] == nil {
		r.both[stage] = make(chan struct{})
	}
	both := r.both[stage]
	if n == 2 {
		close(both)
	}
	r.mu.Unlock()
	if n > 2 {
		return nil
	}
	select {
	case <-both:
		return nil
	case <-time.After(30 * time.Second): // a bound, not a wait: both come at once
		r.t.Errorf("the other create never reached %s", stage)
		return errors.New("no rendezvous")
	}
}

// TestConcurrentOverlappingCreatesOneWins: two creates of the same search
// under different ids at once (two engines, two requests) both passed the
// overlap check, made against the schedules listed before either was
// stored, and both were created. Here both are stored, and both read the
// claim on their search before either writes it: one write wins, the
// other is made again, finds the winner listed and is refused; its record
// is removed.
func TestConcurrentOverlappingCreatesOneWins(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	r := &rendezvous{t: t}
	h := &hooks{
		beforeStore: func() error { return r.meet("store") },
		beforeClaim: func(string) error { return r.meet("claim") },
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, id := range []string{"a", "b"} {
		s := w.newSchedules(w.timers, nil, h)
		d := espresso(id, "@hourly")
		d.Query = "espresso scale"
		wg.Go(func() { _, errs[i] = s.Create(ctx, d) })
	}
	wg.Wait()
	require.True(t, (errs[0] == nil) != (errs[1] == nil), "one is created, one refused: %v", errs)
	var se *engine.ScheduleError
	require.ErrorAs(t, errors.Join(errs...), &se)
	require.Equal(t, "overlapping_schedule", se.Reason)
	list, err := w.schedules(nil).List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "the refused one is not left stored")
	require.False(t, list[0].Creating)
}

// TestCreateStoppedHalfwayBlocksNothingForEver: a create that stops after
// storing its record, before its claim on the search, leaves a record
// that neither fires nor blocks (another schedule for the search is
// created; the stopped one, tried again, is refused and removed). One
// that stops after its claim, before marking the record created, blocks
// the search until the sweep finishes it. A delete whose release of the
// claim failed leaves a claim naming a schedule that is gone, which the
// next create on the search drops.
func TestCreateStoppedHalfwayBlocksNothingForEver(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	crash := errors.New("the process stops here")
	s, h := w.hooked(nil)
	plain := w.schedules(nil)
	same := func(id string) recurring.Definition {
		d := espresso(id, "@hourly")
		d.Query = "espresso scale"
		return d
	}

	failClaim := func() { f := once(func() error { return crash }); h.beforeClaim = func(string) error { return f() } }
	failClaim()
	_, err := s.Create(ctx, same("stopped"))
	require.ErrorIs(t, err, crash)
	rec, _, err := plain.Get(ctx, "stopped")
	require.NoError(t, err)
	require.True(t, rec.Creating, "stored, not yet created")
	_, err = plain.Create(ctx, same("next"))
	require.NoError(t, err, "a create that stopped before its claim blocks nothing")
	_, err = plain.Create(ctx, same("stopped"))
	var se *engine.ScheduleError
	require.ErrorAs(t, err, &se, "tried again, it overlaps the one created meanwhile")
	require.Equal(t, "overlapping_schedule", se.Reason)
	_, _, err = plain.Get(ctx, "stopped")
	require.ErrorIs(t, err, engine.ErrNoSchedule, "and is removed")
	require.NoError(t, plain.Delete(ctx, "next"))

	h.beforeWrite = once(func() error { return crash })
	_, err = s.Create(ctx, same("claimed"))
	require.ErrorIs(t, err, crash)
	_, err = plain.Create(ctx, same("other"))
	require.ErrorAs(t, err, &se, "claimed: it blocks the search")
	n, err := plain.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 0, n)
	rec, _, err = plain.Get(ctx, "claimed")
	require.NoError(t, err)
	require.False(t, rec.Creating, "the sweep finished it")
	require.True(t, w.timers.armed("claimed"), "and armed its timer")

	failClaim()
	require.NoError(t, s.Delete(ctx, "claimed"), "deleted, its claim not released")
	_, err = plain.Create(ctx, same("after"))
	require.NoError(t, err, "the claim of a schedule that is gone is dropped")
	list, err := plain.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1, "claims are not listed as schedules")
}

// TestCatchUpSkipsExpiredSlots: a catch-up after a long downtime orders no
// slot that intake would refuse as slot_expired; those count as skipped.
func TestCatchUpSkipsExpiredSlots(t *testing.T) {
	w := newSchedWorld(t)
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC)}
	s := w.schedules(c.Now)
	horizon := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC) // slots before it have expired
	s.SkipExpiredWith(func(slot time.Time) bool { return slot.Before(horizon) })
	def := espresso("hourly", "@hourly")
	def.CatchUp = recurring.CatchUp{Policy: recurring.CatchUpFire, Limit: 10}
	_, err := s.Create(ctx, def)
	require.NoError(t, err)

	c.Set(time.Date(2026, 12, 2, 14, 10, 0, 0, time.UTC))
	plan, err := s.Fire(ctx, def.ID)
	require.NoError(t, err)
	require.Equal(t, []time.Time{horizon, horizon.Add(time.Hour), horizon.Add(2 * time.Hour)}, plan.Fire)
	require.Equal(t, 3, plan.Skipped, "09:00, 10:00 and 11:00 had expired")
	require.EqualValues(t, 3, w.scheduleCommands())
}
