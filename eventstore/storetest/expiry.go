package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/eventstore"
)

// testExpiry: appends under eventstore.WithExpiry leave the log at the
// job's expiry, and a job leaves whole: every load finds its whole
// history or nothing, never a part. A job without an expiry stays. The
// store's TTLs run on the real clock (the server's smallest is a second).
func testExpiry(t *testing.T, s Store) {
	ctx := context.Background()
	job, group, kept := NewJobID(), NewJobID(), NewJobID()
	exp := time.Now().Add(2 * time.Second)
	ectx := eventstore.WithExpiry(ctx, exp)
	v, err := s.Append(ectx, job, 0, NewEvents(job, 1, 2)...)
	require.NoError(t, err)
	v, err = s.Append(ectx, job, v, NewEvents(job, 3, 1)...)
	require.NoError(t, err)
	_, err = s.Append(ectx, job, v, NewEvents(job, 4, 2)...)
	require.NoError(t, err)
	res := s.AppendMany(ctx, []eventstore.Append{{JobID: group, Events: NewEvents(group, 1, 2), Expires: exp}})
	require.NoError(t, res[0].Err)
	_, err = s.Append(ctx, kept, 0, NewEvents(kept, 1, 2)...)
	require.NoError(t, err)

	whole := func(jobID string, n int) bool {
		evs, v, err := s.Load(ctx, jobID)
		require.NoError(t, err)
		if len(evs) == 0 {
			require.Zero(t, v, "a job that left has no version")
			return false
		}
		require.Len(t, evs, n, "job %s was found in part", jobID)
		return true
	}
	require.True(t, whole(job, 5), "before its expiry the job is whole")
	require.Eventually(t, func() bool {
		// Until it has left, the job is whole at every load.
		return !whole(job, 5) && !whole(group, 2)
	}, 15*time.Second, 20*time.Millisecond)
	require.True(t, whole(kept, 2), "a job without an expiry stays")
	for range 3 {
		require.False(t, whole(job, 5), "a job that left does not come back")
	}
}
