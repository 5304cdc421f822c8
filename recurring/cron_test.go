package recurring_test

import (
	"testing"
	"time"

	"github.com/serpent-engine/serpent/recurring"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 12, 2, 14, 7, 30, 0, time.UTC)

func TestCronNext(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	tests := []struct {
		expr  string
		loc   *time.Location
		after time.Time
		want  []string
	}{
		{"0 * * * *", nil, t0, []string{"2026-12-02T15:00:00Z", "2026-12-02T16:00:00Z"}},
		{"*/15 * * * *", nil, t0, []string{"2026-12-02T14:15:00Z", "2026-12-02T14:30:00Z"}},
		{"*/10 * * * * *", nil, t0, []string{"2026-12-02T14:07:40Z", "2026-12-02T14:07:50Z"}},
		{"@hourly", nil, t0, []string{"2026-12-02T15:00:00Z"}},
		{"@daily", nil, t0, []string{"2026-12-03T00:00:00Z"}},
		{"@weekly", nil, t0, []string{"2026-12-06T00:00:00Z"}},
		{"@monthly", nil, t0, []string{"2027-01-01T00:00:00Z"}},
		{"@yearly", nil, t0, []string{"2027-01-01T00:00:00Z"}},
		{"0 9 * * MON-FRI", nil, t0, []string{"2026-12-03T09:00:00Z", "2026-12-04T09:00:00Z", "2026-12-07T09:00:00Z"}},
		{"0 0 1,15 * *", nil, t0, []string{"2026-12-15T00:00:00Z", "2027-01-01T00:00:00Z"}},
		{"0 0 13 * FRI", nil, t0, []string{"2026-12-04T00:00:00Z", "2026-12-11T00:00:00Z", "2026-12-13T00:00:00Z"}},
		{"0 0 29 2 *", nil, t0, []string{"2028-02-29T00:00:00Z"}},
		{"0 8 * * *", berlin, t0, []string{"2026-12-03T07:00:00Z"}},
		// Spring forward: 02:30 does not exist on 29 March 2026 in Berlin.
		{"30 2 * * *", berlin, time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC), []string{"2026-03-30T00:30:00Z"}},
		// Fall back: 02:30 happens twice on 25 October 2026; it is one slot.
		{"30 2 * * *", berlin, time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC), []string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"0 0 * * 7", nil, t0, []string{"2026-12-06T00:00:00Z"}},
		// A day field starting with "*" is a star, as in Vixie cron: then
		// a day matches both fields; two restricted ones, either.
		{"0 0 */1 * MON", nil, t0, []string{"2026-12-07T00:00:00Z", "2026-12-14T00:00:00Z"}},
		{"0 0 */2 * MON", nil, t0, []string{"2026-12-07T00:00:00Z", "2026-12-21T00:00:00Z"}},
		{"0 0 1,15 * MON", nil, t0, []string{"2026-12-07T00:00:00Z", "2026-12-14T00:00:00Z", "2026-12-15T00:00:00Z"}},
		// A weekday step from a value ends on Saturday: no Sunday.
		{"0 0 * * MON/2", nil, t0, []string{"2026-12-04T00:00:00Z", "2026-12-07T00:00:00Z", "2026-12-09T00:00:00Z", "2026-12-11T00:00:00Z", "2026-12-14T00:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			spec, err := recurring.Parse(tt.expr, tt.loc, t0)
			require.NoError(t, err)
			at := tt.after
			for _, w := range tt.want {
				at = spec.Next(at)
				require.Equal(t, w, at.UTC().Format(time.RFC3339))
			}
		})
	}
}

func TestEvery(t *testing.T) {
	spec, err := recurring.Parse("@every 90s", nil, t0.Add(250*time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, t0, spec.Next(t0.Add(-time.Hour)), "the first slot is the anchor, to the second")
	require.Equal(t, t0.Add(90*time.Second), spec.Next(t0))
	require.Equal(t, t0.Add(180*time.Second), spec.Next(t0.Add(91*time.Second)))
}

func TestParseErrors(t *testing.T) {
	for expr, want := range map[string]string{
		"":                 "5 fields",
		"* * *":            "5 fields",
		"61 * * * *":       "minute field",
		"* 24 * * *":       "hour field",
		"* * 0 * *":        "day-of-month field",
		"* * * 13 *":       "month field",
		"* * * * FUNDAY":   "day-of-week field",
		"*/0 * * * *":      "step",
		"5-1 * * * *":      "backwards",
		"@every 500ms":     "at least 1s",
		"@every often":     "duration",
		"@fortnightly":     "5 fields",
		"1 2 3 4 5 6 7":    "5 fields",
		"a-b * * * * *":    "second field",
		"* * * * * JAN":    "day-of-week field",
		"*/5 * * * * * *":  "5 fields",
		"@every 1h @every": "duration",
	} {
		t.Run(expr, func(t *testing.T) {
			_, err := recurring.Parse(expr, nil, t0)
			require.ErrorContains(t, err, want)
		})
	}
}

// TestCronNextAcrossOddClockChanges: zones west of UTC, where Go moves a
// wall time a spring-forward gap skips to an earlier instant (once an
// endless loop), gaps at midnight, and a fall-back of half an hour: every
// slot comes once, in order, and Next always returns.
func TestCronNextAcrossOddClockChanges(t *testing.T) {
	zone := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		require.NoError(t, err)
		return loc
	}
	tests := []struct {
		name  string
		expr  string
		loc   *time.Location
		after time.Time
		want  []string
	}{
		{"a daily 9am in New York over spring forward", "0 9 * * *", zone("America/New_York"),
			time.Date(2026, 3, 7, 20, 0, 0, 0, time.UTC), []string{"2026-03-08T13:00:00Z", "2026-03-09T13:00:00Z"}},
		// Midnight of 6 September 2026 does not exist in Santiago.
		{"midnight skipped in Santiago", "0 0 * * *", zone("America/Santiago"),
			time.Date(2026, 9, 5, 4, 0, 0, 0, time.UTC), []string{"2026-09-07T03:00:00Z", "2026-09-08T03:00:00Z"}},
		{"half past midnight skipped in Havana", "30 0 * * *", zone("America/Havana"),
			time.Date(2026, 3, 7, 17, 0, 0, 0, time.UTC), []string{"2026-03-09T04:30:00Z"}},
		{"the first of a month whose midnight is skipped", "0 0 1 * *", zone("America/Santiago"),
			time.Date(2026, 8, 15, 0, 0, 0, 0, time.UTC), []string{"2026-09-01T04:00:00Z", "2026-10-01T03:00:00Z"}},
		// Lord Howe goes back half an hour: 01:30-01:59 on 5 April 2026
		// happens twice; 01:45 is one slot, the first.
		{"half an hour repeated on Lord Howe", "45 1 * * *", zone("Australia/Lord_Howe"),
			time.Date(2026, 4, 4, 12, 0, 0, 0, time.UTC), []string{"2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := recurring.Parse(tt.expr, tt.loc, t0)
			require.NoError(t, err)
			got := make(chan []string, 1)
			go func() {
				var out []string
				at := tt.after
				for range tt.want {
					at = spec.Next(at)
					out = append(out, at.UTC().Format(time.RFC3339))
				}
				got <- out
			}()
			select {
			case out := <-got:
				require.Equal(t, tt.want, out)
			case <-time.After(10 * time.Second):
				t.Fatal("Next did not return")
			}
		})
	}
}

// TestCronNextFindsRareSlots: the Gregorian calendar, weekdays included,
// repeats every 400 years, so Next looks that far ahead. 29 February on a
// Sunday comes in 2032 and then not until 2060; with a five-year horizon
// the slot after 2032 was "none", and the schedule was taken for over.
func TestCronNextFindsRareSlots(t *testing.T) {
	spec, err := recurring.Parse("0 0 29 2 */7", nil, time.Time{})
	require.NoError(t, err)
	first := spec.Next(time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC))
	require.Equal(t, time.Date(2032, 2, 29, 0, 0, 0, 0, time.UTC), first)
	require.Equal(t, time.Date(2060, 2, 29, 0, 0, 0, 0, time.UTC), spec.Next(first))

	never, err := recurring.Parse("0 0 30 2 *", nil, time.Time{})
	require.NoError(t, err)
	require.True(t, never.Next(t0).IsZero(), "30 February never comes")
}

// BenchmarkCronNext: the next slot of an hourly expression, of one with
// decades between slots, and the full 400-year search of one that has
// none (what validating it costs).
func BenchmarkCronNext(b *testing.B) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(b, err)
	for _, bc := range []struct{ name, expr string }{
		{"hourly", "0 * * * *"},
		{"29 February on a Sunday", "0 0 29 2 */7"},
		{"never", "0 0 31 4,6,9,11 *"},
	} {
		spec, err := recurring.Parse(bc.expr, berlin, time.Time{})
		require.NoError(b, err)
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				spec.Next(t0)
			}
		})
	}
}
