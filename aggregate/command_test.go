package aggregate_test

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/stretchr/testify/require"
)

func TestScheduleCommandValidation(t *testing.T) {
	good := aggregate.ScheduleCommand{Slot: "2026-12-02T14:00:00Z", Query: "espresso scale", Country: "US", Language: "en", Device: "mobile", Limit: aggregate.LimitOf(10)}
	tests := []struct {
		name   string
		mutate func(*aggregate.ScheduleCommand)
		fields []string
	}{
		{"missing slot", func(c *aggregate.ScheduleCommand) { c.Slot = "" }, []string{"slot"}},
		{"bad slot", func(c *aggregate.ScheduleCommand) { c.Slot = "tomorrow at nine" }, []string{"slot"}},
		{"slot before year 0 in UTC", func(c *aggregate.ScheduleCommand) { c.Slot = "0000-01-01T00:00:00+01:00" }, []string{"slot"}},
		{"slot after year 9999 in UTC", func(c *aggregate.ScheduleCommand) { c.Slot = "9999-12-31T23:30:00-01:00" }, []string{"slot"}},
		{"the zero time", func(c *aggregate.ScheduleCommand) { c.Slot = "0001-01-01T00:00:00Z" }, []string{"slot"}},
		{"empty query", func(c *aggregate.ScheduleCommand) { c.Query = "   " }, []string{"query"}},
		{"long query", func(c *aggregate.ScheduleCommand) { c.Query = string(make([]byte, 3000)) + "x" }, nil},
		{"country", func(c *aggregate.ScheduleCommand) { c.Country = "USA" }, []string{"country"}},
		{"language", func(c *aggregate.ScheduleCommand) { c.Language = "english" }, []string{"language"}},
		{"device", func(c *aggregate.ScheduleCommand) { c.Device = "tablet" }, []string{"device"}},
		{"limit", func(c *aggregate.ScheduleCommand) { c.Limit = aggregate.LimitOf(101) }, []string{"limit"}},
		{"priority", func(c *aggregate.ScheduleCommand) { c.Priority = "urgent" }, []string{"priority"}},
		{"account", func(c *aggregate.ScheduleCommand) { c.Account = "Main Account" }, []string{"account"}},
		{"everything", func(c *aggregate.ScheduleCommand) { *c = aggregate.ScheduleCommand{Limit: aggregate.LimitOf(-1)} },
			[]string{"slot", "query", "country", "language", "device", "limit"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.mutate(&c)
			_, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "test")
			var ve *aggregate.ValidationError
			require.ErrorAs(t, err, &ve)
			if tt.fields != nil {
				var got []string
				for _, f := range ve.Fields {
					got = append(got, f.Field)
					require.NotEmpty(t, f.Message)
				}
				require.Equal(t, tt.fields, got)
				require.Equal(t, "invalid_"+tt.fields[0], ve.Reason())
			}
		})
	}
}

// TestFieldMessagesStayShort: a message quotes the first bytes of a bad
// value, not all 16 KiB of it.
func TestFieldMessagesStayShort(t *testing.T) {
	long := strings.Repeat("ü", 5000)
	c := aggregate.ScheduleCommand{Slot: long, Query: "q", Country: long, Language: long, Device: long, Account: long, Priority: long}
	_, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "test")
	var ve *aggregate.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Len(t, ve.Fields, 6)
	for _, f := range ve.Fields {
		require.Less(t, len(f.Message), 200, f.Field)
		require.Contains(t, f.Message, "(10000 bytes)", f.Field)
		require.True(t, utf8.ValidString(f.Message))
	}
}

func TestJobIDIsTheObservation(t *testing.T) {
	base := aggregate.ScheduleCommand{Slot: "2026-12-02T14:00:00Z", Query: "espresso scale", Country: "US", Language: "en", Device: "mobile"}
	sched := func(c aggregate.ScheduleCommand) aggregate.Schedule {
		s, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "test")
		require.NoError(t, err)
		return s
	}
	a := sched(base)
	require.Equal(t, `{"query":"espresso scale","country":"US","language":"en","device":"mobile","limit":10}`, a.Body,
		"the body of the seed article, byte for byte")
	require.Len(t, a.JobID, 32)

	same := base
	same.Slot = "2026-12-02T15:00:00+01:00"
	same.Query = "  espresso   scale "
	same.Country, same.Language, same.Device, same.Limit = "us", "EN", "Mobile", aggregate.LimitOf(10)
	same.Priority, same.Account = "high", "team-b"
	require.Equal(t, a.JobID, sched(same).JobID, "the same slot and search in other spellings is the same job")

	for name, mutate := range map[string]func(*aggregate.ScheduleCommand){
		"next slot": func(c *aggregate.ScheduleCommand) { c.Slot = "2026-12-02T15:00:00Z" },
		"query":     func(c *aggregate.ScheduleCommand) { c.Query = "espresso scales" },
		"country":   func(c *aggregate.ScheduleCommand) { c.Country = "GB" },
		"language":  func(c *aggregate.ScheduleCommand) { c.Language = "de" },
		"device":    func(c *aggregate.ScheduleCommand) { c.Device = "desktop" },
		"limit":     func(c *aggregate.ScheduleCommand) { c.Limit = aggregate.LimitOf(20) },
	} {
		c := base
		mutate(&c)
		require.NotEqual(t, a.JobID, sched(c).JobID, name)
	}
	require.Equal(t, time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC), a.NotBefore)
}
