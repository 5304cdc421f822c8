package httpops

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
)

func TestMoneyShowsFractionsOfACent(t *testing.T) {
	for micros, want := range map[int64]string{
		0: "$0.00", 1000: "$0.001", 3000: "$0.003", 1234: "$0.001234", 10000: "$0.01",
		1500000: "$1.50", 2000000: "$2.00", 12345678: "$12.345678", -2500: "-$0.0025",
	} {
		require.Equal(t, want, money(micros), "%d micros", micros)
	}
}

func TestWaitShowsTheDateWhenNotToday(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	require.Equal(t, "until 09:30:00 UTC (in 30m)", waitUntil(now, now.Add(30*time.Minute)))
	require.Equal(t, "until 2027-02-01 08:00:00 UTC (in 55d)", waitUntil(now, time.Date(2027, 2, 1, 8, 0, 0, 0, time.UTC)))
	require.Equal(t, "until 2026-12-08 01:00:00 UTC (in 16h)", waitUntil(now, now.Add(16*time.Hour)))
}

func TestCancelledJobShowsItsOutcome(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	v := projections.JobView{JobID: "j", Cancelled: &events.JobCancelled{By: "ops", Reason: "slot no longer wanted"}}
	require.Equal(t, "cancelled by ops: slot no longer wanted", recentJobOf(v, now).Outcome)

	v.LastOutcome = &projections.OutcomeView{Class: "retryable", Status: 503, Action: "retry_same_key"}
	v.Cancelled.Unresolved = "0123456789abcdef"
	require.Equal(t, "retryable HTTP 503 → retry_same_key; then cancelled by ops: slot no longer wanted (the last send of key 01234567 has no known outcome)",
		recentJobOf(v, now).Outcome)
}
