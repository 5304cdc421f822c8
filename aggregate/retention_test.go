package aggregate_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

func TestExpires(t *testing.T) {
	slot := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	p := aggregate.DefaultPolicy()
	s := aggregate.State{JobID: "j", Version: 1, Slot: slot, ScheduledAt: slot.Add(-time.Hour), Policy: p}
	require.True(t, s.Expires().IsZero(), "no retention: kept for ever")
	s.Policy.Retention = events.Duration(30 * 24 * time.Hour)
	require.Equal(t, slot.Add(30*24*time.Hour), s.Expires(), "from the slot")
	s.ScheduledAt = slot.Add(time.Hour)
	require.Equal(t, slot.Add(time.Hour+30*24*time.Hour), s.Expires(), "from the scheduling, when later")
	require.True(t, aggregate.State{}.Expires().IsZero(), "no job")
}

func TestRepurchaseTooLate(t *testing.T) {
	slot := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	p := aggregate.DefaultPolicy()
	p.Retention = events.Duration(10 * 24 * time.Hour)
	s := aggregate.State{JobID: "j", Version: 1, Slot: slot, ScheduledAt: slot, Policy: p}
	margin := aggregate.DefaultSkewMargin
	last := s.Expires().Add(-p.MaxAge.D() - margin) // the last moment a re-purchase may start
	require.False(t, s.RepurchaseTooLate(last, margin))
	require.True(t, s.RepurchaseTooLate(last.Add(time.Second), margin))
	s.Policy.Retention = 0
	require.False(t, s.RepurchaseTooLate(last.Add(365*24*time.Hour), margin), "a job kept for ever")
}

func TestSlotExpired(t *testing.T) {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	r, m := 30*24*time.Hour, 24*time.Hour
	require.True(t, aggregate.SlotExpired(now.Add(-r+m-time.Second), now, r, m))
	require.False(t, aggregate.SlotExpired(now.Add(-r+m), now, r, m))
	require.False(t, aggregate.SlotExpired(now.Add(-10*r), now, 0, m), "no retention refuses nothing")
}
