package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// testRace has N goroutines append to one job at the same version, round
// after round: exactly one wins each round, the others get ErrConcurrency.
func testRace(t *testing.T, s Store) {
	const racers, rounds = 8, 3
	ctx := context.Background()
	job := NewJobID()
	var history []events.Event
	var version uint64
	for round := range rounds {
		start := make(chan struct{})
		evs := make([][]events.Event, racers)
		versions := make([]uint64, racers)
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			// Half the racers append one event, half an atomic pair.
			evs[i] = NewEvents(job, uint64(len(history)+1), 1+i%2)
			wg.Go(func() {
				<-start
				versions[i], errs[i] = s.Append(ctx, job, version, evs[i]...)
			})
		}
		close(start)
		wg.Wait()

		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "round %d: racers %d and %d both won", round, winner, i)
				winner = i
				continue
			}
			require.ErrorIs(t, err, eventstore.ErrConcurrency, "round %d, racer %d", round, i)
		}
		require.NotEqual(t, -1, winner, "round %d: nobody won", round)
		history = append(history, evs[winner]...)
		version = versions[winner]
		requireJob(t, s, job, history, version)
	}
}

// testManyJobs interleaves appends to many jobs and checks every job
// reads back whole and alone.
func testManyJobs(t *testing.T, s Store) {
	const jobs, appends = 40, 3
	ctx := context.Background()
	ids := make([]string, jobs)
	want := make([][]events.Event, jobs)
	versions := make([]uint64, jobs)
	for i := range ids {
		ids[i] = NewJobID()
	}
	for a := range appends {
		for i, job := range ids {
			evs := NewEvents(job, uint64(len(want[i])+1), 1+(i+a)%2)
			v, err := s.Append(ctx, job, versions[i], evs...)
			require.NoError(t, err)
			require.Greater(t, v, versions[i])
			want[i] = append(want[i], evs...)
			versions[i] = v
		}
	}
	for i, job := range ids {
		requireJob(t, s, job, want[i], versions[i])
	}
}
