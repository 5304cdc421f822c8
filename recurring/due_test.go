package recurring_test

import (
	"testing"
	"time"

	"github.com/serpent-engine/serpent/recurring"
	"github.com/stretchr/testify/require"
)

func hourly(t *testing.T, mutate func(*recurring.Definition)) (recurring.Definition, recurring.Spec) {
	t.Helper()
	d := recurring.Definition{ID: "espresso-hourly", Schedule: "0 * * * *", Query: "espresso scale", Country: "us",
		Language: "EN", Device: "mobile"}
	if mutate != nil {
		mutate(&d)
	}
	d, spec, err := d.Canonical(nil, t0)
	require.NoError(t, err)
	return d, spec
}

func TestDueCatchUp(t *testing.T) {
	created := time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC)
	down := time.Date(2026, 12, 2, 14, 10, 0, 0, time.UTC) // back after 6 missed slots
	for _, tt := range []struct {
		name    string
		catchUp recurring.CatchUp
		fire    []string
		skipped int
	}{
		{"skip", recurring.CatchUp{Policy: recurring.CatchUpSkip}, []string{"14:00"}, 5},
		{"fire up to a limit", recurring.CatchUp{Policy: recurring.CatchUpFire, Limit: 3}, []string{"11:00", "12:00", "13:00", "14:00"}, 2},
		{"fire all", recurring.CatchUp{Policy: recurring.CatchUpFire, Limit: 100}, []string{"09:00", "10:00", "11:00", "12:00", "13:00", "14:00"}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, spec := hourly(t, func(d *recurring.Definition) { d.CatchUp = tt.catchUp })
			p := recurring.Due(d, spec, recurring.State{Created: created}, down)
			var got []string
			for _, s := range p.Fire {
				got = append(got, s.Format("15:04"))
			}
			require.Equal(t, tt.fire, got)
			require.Equal(t, tt.skipped, p.Skipped)
			require.Equal(t, time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC), p.Next)

			st := recurring.State{Created: created}.Apply(p, make([]string, len(p.Fire)))
			again := recurring.Due(d, spec, st, down.Add(time.Minute))
			require.Empty(t, again.Fire, "a repeated firing orders nothing new")
		})
	}
}

func TestDueBounds(t *testing.T) {
	start := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	end := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	d, spec := hourly(t, func(d *recurring.Definition) {
		d.Start, d.End = start, end
		d.CatchUp = recurring.CatchUp{Policy: recurring.CatchUpFire, Limit: 10}
	})
	p := recurring.Due(d, spec, recurring.State{Created: start.Add(-time.Hour)}, end.Add(3*time.Hour))
	require.Equal(t, []time.Time{start, start.Add(time.Hour)}, p.Fire, "the start is a slot, the end is not")
	require.True(t, p.Next.IsZero(), "over")

	fresh, spec := hourly(t, nil)
	p = recurring.Due(fresh, spec, recurring.State{Created: t0}, t0)
	require.Empty(t, p.Fire, "a new schedule does not order the past")
	require.Equal(t, time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC), p.Next)
}

func TestDefinitionErrors(t *testing.T) {
	base := recurring.Definition{ID: "a", Schedule: "@hourly", Query: "q", Country: "US", Language: "en", Device: "mobile"}
	for name, tc := range map[string]struct {
		mutate func(*recurring.Definition)
		want   []string
	}{
		"bad cron":      {func(d *recurring.Definition) { d.Schedule = "0 25 * * *" }, []string{"hour field"}},
		"bad id":        {func(d *recurring.Definition) { d.ID = "Hourly Check" }, []string{"id:"}},
		"bad search":    {func(d *recurring.Definition) { d.Country, d.Device = "USA", "tv" }, []string{"country", "device"}},
		"bad window":    {func(d *recurring.Definition) { d.Start, d.End = t0, t0 }, []string{"end must be after start"}},
		"bad catchup":   {func(d *recurring.Definition) { d.CatchUp.Policy = "sometimes" }, []string{"catch_up.policy"}},
		"big catchup":   {func(d *recurring.Definition) { d.CatchUp = recurring.CatchUp{Policy: "fire", Limit: 5000} }, []string{"catch_up.limit"}},
		"never fires":   {func(d *recurring.Definition) { d.Schedule = "0 0 30 2 *" }, []string{"no slot ever"}},
		"ancient start": {func(d *recurring.Definition) { d.Start = time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC) }, []string{"at most a year before"}},
	} {
		t.Run(name, func(t *testing.T) {
			d := base
			tc.mutate(&d)
			_, _, err := d.Canonical(nil, t0)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestOverlap(t *testing.T) {
	a, _ := hourly(t, nil)
	b, _ := hourly(t, func(d *recurring.Definition) { d.ID, d.Schedule, d.Query = "b", "*/30 * * * *", " espresso  scale" })
	require.True(t, a.Overlaps(b), "same search, both open-ended")
	c, _ := hourly(t, func(d *recurring.Definition) { d.ID, d.Query = "c", "grinder" })
	require.False(t, a.Overlaps(c))
	early, _ := hourly(t, func(d *recurring.Definition) { d.ID, d.Start, d.End = "early", t0.Add(-24*time.Hour), t0 })
	late, _ := hourly(t, func(d *recurring.Definition) { d.ID, d.Start = "late", t0 })
	require.False(t, early.Overlaps(late), "one ends where the other starts")
}

// TestEndBeforeTheFirstSlotIsRefused: a definition whose end comes before
// its first slot (from its start, or from its creation without one) would
// never order anything; it is refused, naming the end and that slot. An
// end in the past is fine while a slot from a past start comes before it.
func TestEndBeforeTheFirstSlotIsRefused(t *testing.T) {
	base := recurring.Definition{ID: "a", Schedule: "@hourly", Query: "q", Country: "US", Language: "en", Device: "mobile"}
	for name, mutate := range map[string]func(*recurring.Definition){
		"an end before the creation": func(d *recurring.Definition) { d.End = t0.AddDate(0, -1, 0) },
		"an end before the first slot after the creation": func(d *recurring.Definition) {
			d.End = time.Date(2026, 12, 2, 14, 30, 0, 0, time.UTC) // created 14:07:30, first slot 15:00
		},
		"an end at the first slot after the start": func(d *recurring.Definition) {
			d.Start, d.End = time.Date(2026, 12, 5, 10, 30, 0, 0, time.UTC), time.Date(2026, 12, 5, 11, 0, 0, 0, time.UTC)
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := base
			mutate(&d)
			_, _, err := d.Canonical(nil, t0)
			require.ErrorContains(t, err, "end")
			require.ErrorContains(t, err, "orders nothing")
		})
	}
	past := base
	past.Start, past.End = t0.Add(-10*time.Hour), t0.Add(-5*time.Hour)
	_, _, err := past.Canonical(nil, t0)
	require.NoError(t, err, "a window in the past with slots in it orders them at once")
}

// TestPendingUntilPublished: the slots a firing records are pending until
// their commands are published; publishing some leaves a later firing's.
func TestPendingUntilPublished(t *testing.T) {
	d, spec := hourly(t, nil)
	created := time.Date(2026, 12, 2, 8, 30, 0, 0, time.UTC)
	first := recurring.Due(d, spec, recurring.State{Created: created}, time.Date(2026, 12, 2, 9, 0, 1, 0, time.UTC))
	st := recurring.State{Created: created}.Apply(first, []string{"job-9"})
	second := recurring.Due(d, spec, st, time.Date(2026, 12, 2, 10, 0, 1, 0, time.UTC))
	st = st.Apply(second, []string{"job-10"})
	require.Equal(t, []recurring.Fired{{Slot: first.Fire[0], JobID: "job-9"}, {Slot: second.Fire[0], JobID: "job-10"}}, st.Pending)
	require.Equal(t, st.Pending, st.Recent)

	st = st.Published([]recurring.Fired{{Slot: first.Fire[0], JobID: "job-9"}})
	require.Equal(t, []recurring.Fired{{Slot: second.Fire[0], JobID: "job-10"}}, st.Pending)
	require.Len(t, st.Recent, 2, "the history keeps both")
	st = st.Published([]recurring.Fired{{Slot: second.Fire[0], JobID: "job-10"}})
	require.Nil(t, st.Pending)
}
