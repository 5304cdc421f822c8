package storetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

func testGroupCommit(t *testing.T, s Store) {
	ctx := context.Background()
	var appends []eventstore.Append
	for i := range 10 {
		job := NewJobID()
		appends = append(appends, eventstore.Append{JobID: job, Events: NewEvents(job, 1, 1+i%3)})
	}
	// Refused before anything is sent: another job's event, too large.
	bad := NewJobID()
	appends = append(appends[:3], append([]eventstore.Append{{JobID: bad, Events: NewEvents(NewJobID(), 1, 1)}}, appends[3:]...)...)
	big := NewJobID()
	appends = append(appends, eventstore.Append{JobID: big, Events: []events.Event{padded(big, 1, 2<<20)}})
	// A second append of a job already in the group, at the same version.
	first := appends[0]
	appends = append(appends, eventstore.Append{JobID: first.JobID, Events: NewEvents(first.JobID, 1, 1)})

	check := func(res []eventstore.Result) {
		t.Helper()
		require.Len(t, res, len(appends))
		for i, r := range res {
			a := appends[i]
			switch {
			case a.JobID == bad:
				require.ErrorIs(t, r.Err, eventstore.ErrInvalid)
			case a.JobID == big:
				require.ErrorIs(t, r.Err, eventstore.ErrTooLarge)
			case i == len(appends)-1:
				require.ErrorIs(t, r.Err, eventstore.ErrConcurrency, "the job's first append of the group came first")
			default:
				require.NoError(t, r.Err, "append %d", i)
				requireJob(t, s, a.JobID, a.Events, r.Version)
			}
		}
	}
	commitTwice(t, ctx, s, appends, check)
	requireJob(t, s, bad, nil, 0)
	requireJob(t, s, big, nil, 0)
}

// testGroupCommitConflicts checks that one refused append does not fail
// the others of its batch.
func testGroupCommitConflicts(t *testing.T, s Store) {
	staleAndDuplicate(t, s, 6, 2, 2, 4)
}

// testGroupCommitSingles is a small group of one-event appends (which a
// JetStream store publishes as plain messages, in flight together): a
// stale one and a duplicate one fail alone.
func testGroupCommitSingles(t *testing.T, s Store) {
	staleAndDuplicate(t, s, 5, 1, 1, 3)
}

// staleAndDuplicate gives jobs jobs one event each, then appends n more
// to each of them in one group commit, the append at stale with a stale
// version and the one at dup with its last event carrying the id of its
// job's first: those two fail alone, the others land, and the same group
// again gets the same answers and writes nothing.
func staleAndDuplicate(t *testing.T, s Store, jobs, n, stale, dup int) {
	ctx := context.Background()
	heads := make([][]events.Event, jobs)
	versions := make([]uint64, jobs)
	appends := make([]eventstore.Append, jobs)
	for i := range appends {
		job := NewJobID()
		heads[i] = NewEvents(job, 1, 1)
		v, err := s.Append(ctx, job, 0, heads[i]...)
		require.NoError(t, err)
		versions[i] = v
		appends[i] = eventstore.Append{JobID: job, Expected: v, Events: NewEvents(job, 2, n)}
	}
	appends[stale].Expected = 0
	appends[dup].Events[0].ID = heads[dup][0].ID
	check := func(res []eventstore.Result) {
		t.Helper()
		require.Len(t, res, jobs)
		for i, r := range res {
			a := appends[i]
			switch i {
			case stale:
				require.ErrorIs(t, r.Err, eventstore.ErrConcurrency)
				requireJob(t, s, a.JobID, heads[i], versions[i])
			case dup:
				require.ErrorIs(t, r.Err, eventstore.ErrDuplicate)
				requireJob(t, s, a.JobID, heads[i], versions[i])
			default:
				require.NoError(t, r.Err, "append %d", i)
				requireJob(t, s, a.JobID, concat(heads[i], a.Events), r.Version)
			}
		}
	}
	commitTwice(t, ctx, s, appends, check)
}

// commitTwice group-commits appends and checks the results, then commits
// the same group again: a retry, which must check the same and give the
// same versions, writing nothing new.
func commitTwice(t *testing.T, ctx context.Context, s Store, appends []eventstore.Append, check func([]eventstore.Result)) {
	t.Helper()
	res := s.AppendMany(ctx, appends)
	check(res)
	again := s.AppendMany(ctx, appends)
	check(again)
	for i := range res {
		require.Equal(t, res[i].Version, again[i].Version, "append %d", i)
	}
}

// testGroupCommitLarge spans several atomic batches.
func testGroupCommitLarge(t *testing.T, s Store) {
	const jobs = 550 // 1,100 messages: more than one batch of 1,000
	appends := make([]eventstore.Append, jobs)
	for i := range appends {
		job := NewJobID()
		appends[i] = eventstore.Append{JobID: job, Events: NewEvents(job, 1, 2)}
	}
	res := s.AppendMany(context.Background(), appends)
	require.Len(t, res, jobs)
	seen := make(map[uint64]bool)
	for i, r := range res {
		require.NoError(t, r.Err, "append %d", i)
		require.False(t, seen[r.Version], "two appends got version %d", r.Version)
		seen[r.Version] = true
	}
	for _, i := range []int{0, 1, jobs / 2, jobs - 1} {
		requireJob(t, s, appends[i].JobID, appends[i].Events, res[i].Version)
	}
}
