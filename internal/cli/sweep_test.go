package cli

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/projections"
	"github.com/stretchr/testify/require"
)

// TestLiveJobsWaitsForTheFold: the sweep takes the jobs in flight from a
// fold that has caught up with the log, through where the log ended when
// the round began; one that has not by the next round is passed over with
// a warning, so that the round's sweep of the recurring schedules still
// comes.
func TestLiveJobsWaitsForTheFold(t *testing.T) {
	var out bytes.Buffer
	log := slog.New(slog.NewTextHandler(&out, nil))

	behind := projections.NewTally().ForgetFinished() // never told where the log ends
	ids, ok := liveJobs(t.Context(), behind, 0, 10*time.Millisecond, log)
	require.False(t, ok)
	require.Nil(t, ids)
	require.Contains(t, out.String(), "sweep for lost timers skipped: the metrics' fold of the log has not caught up")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, ok = liveJobs(ctx, behind, 0, 0, log)
	require.False(t, ok, "no bound: until ctx ends")

	caughtUp := projections.NewTally().ForgetFinished()
	caughtUp.CatchUpTo(0) // an empty log
	ids, ok = liveJobs(t.Context(), caughtUp, 0, 10*time.Millisecond, log)
	require.True(t, ok)
	require.Zero(t, ids.Len())

	// Caught up once, but not through where the log ends now: behind.
	out.Reset()
	_, ok = liveJobs(t.Context(), caughtUp, 5, 10*time.Millisecond, log)
	require.False(t, ok, "a fold caught up once and behind since")
	require.Contains(t, out.String(), "log_seq=5")
}
