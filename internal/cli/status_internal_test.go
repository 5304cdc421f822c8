package cli

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestNewestJobsKeepsTheNewest: whatever the order jobs come in, the
// newest N kept are the first N of all of them sorted newest first, and
// the count of jobs seen is all of them.
func TestNewestJobsKeepsTheNewest(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	for range 200 {
		all := make([]statusOut, rng.IntN(60))
		for i := range all {
			// Few distinct times, so that ties fall to the job id.
			all[i].JobID = string(rune('a'+rng.IntN(26))) + string(rune('a'+i%26)) + string(rune('a'+i/26))
			all[i].Updated = t0.Add(time.Duration(rng.IntN(8)) * time.Second)
		}
		limit := rng.IntN(20)
		n := newNewestJobs(limit)
		for _, j := range all {
			n.add(j)
		}
		want := slices.Clone(all)
		slices.SortFunc(want, newerJob)
		if limit > 0 && len(want) > limit {
			want = want[:limit]
		}
		got := n.sorted()
		require.Equal(t, len(all), n.seen)
		require.Equal(t, len(want), len(got), "limit %d of %d", limit, len(all))
		for i := range want {
			require.Equal(t, want[i].JobID, got[i].JobID, "limit %d of %d, at %d", limit, len(all), i)
		}
	}
}

// TestNewestJobsListsAJobOnce: a job read twice, as it moved on during
// the read, is listed once, as of its latest event.
func TestNewestJobsListsAJobOnce(t *testing.T) {
	n := newNewestJobs(5)
	for _, j := range []statusOut{listedJob("a", 1, 0), listedJob("b", 2, time.Second), listedJob("a", 5, 3*time.Second), listedJob("c", 3, 2*time.Second)} {
		n.add(j)
	}
	got := n.sorted()
	require.Equal(t, []string{"a", "c", "b"}, []string{got[0].JobID, got[1].JobID, got[2].JobID})
	require.Equal(t, uint64(5), got[0].Seq, "as of its latest event")
	require.Equal(t, 3, n.seen, "three jobs")
}

// TestNewestJobsKeepsOthersWhenAJobComesAgain: a job given again, newer,
// once the limit is reached takes its own place, not that of the oldest
// job kept.
func TestNewestJobsKeepsOthersWhenAJobComesAgain(t *testing.T) {
	n := newNewestJobs(2)
	for _, j := range []statusOut{listedJob("a", 3, 3*time.Second), listedJob("b", 2, 2*time.Second), listedJob("c", 1, time.Second),
		listedJob("a", 4, 4*time.Second), listedJob("b", 1, time.Second)} {
		n.add(j)
	}
	got := n.sorted()
	require.Len(t, got, 2)
	require.Equal(t, []string{"a", "b"}, []string{got[0].JobID, got[1].JobID})
	require.Equal(t, []uint64{4, 2}, []uint64{got[0].Seq, got[1].Seq}, "each as of its latest event")
	require.Equal(t, 3, n.seen)
}

// listedJob is a job of the list, as of its event at seq, updated at after the
// start of 2026-12-05.
func listedJob(id string, seq uint64, at time.Duration) statusOut {
	var j statusOut
	j.JobID, j.Seq, j.Updated = id, seq, time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC).Add(at)
	return j
}
