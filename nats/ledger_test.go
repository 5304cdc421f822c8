package nats_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/storetest"
	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// jobLog is what a test has seen acknowledged for one job.
type jobLog struct {
	id      string
	events  []events.Event
	version uint64
}

func newJobs(n int) []*jobLog {
	jobs := make([]*jobLog, n)
	for i := range jobs {
		jobs[i] = &jobLog{id: storetest.NewJobID()}
	}
	return jobs
}

// next builds the job's next n events.
func (j *jobLog) next(n int) eventstore.Append {
	return eventstore.Append{JobID: j.id, Expected: j.version, Events: storetest.NewEvents(j.id, uint64(len(j.events)+1), n)}
}

func (j *jobLog) acked(a eventstore.Append, v uint64) {
	j.events = append(j.events, a.Events...)
	j.version = v
}

// appendUntilKnown appends and, while the outcome is unknown, repeats the
// very same append, as the engine will.
func appendUntilKnown(ctx context.Context, es *nats.EventStore, j *jobLog, n int) error {
	a := j.next(n)
	for {
		v, err := es.Append(ctx, a.JobID, a.Expected, a.Events...)
		if errors.Is(err, eventstore.ErrUnknownOutcome) && ctx.Err() == nil {
			continue
		}
		if err != nil {
			return fmt.Errorf("job %s: %w", j.id, err)
		}
		j.acked(a, v)
		return nil
	}
}

// appendRound appends to every job one event, then an atomic pair, then
// one event each in a single group commit.
func appendRound(t *testing.T, ctx context.Context, es *nats.EventStore, jobs []*jobLog) {
	t.Helper()
	for _, n := range []int{1, 2} {
		for _, j := range jobs {
			require.NoError(t, appendUntilKnown(ctx, es, j, n))
		}
	}
	group := make([]eventstore.Append, len(jobs))
	for i, j := range jobs {
		group[i] = j.next(1)
	}
	for i, r := range es.AppendMany(ctx, group) {
		require.NoError(t, r.Err, "group commit, job %s", group[i].JobID)
		jobs[i].acked(group[i], r.Version)
	}
}

// appendGroupUntilKnown appends one event to every job in one group
// commit (a small group of one-message appends: plain messages in flight
// together) and repeats, for the jobs whose outcome is unknown, the very
// same appends until each is known, as the engine will.
func appendGroupUntilKnown(ctx context.Context, es *nats.EventStore, jobs []*jobLog) error {
	apps := make([]eventstore.Append, len(jobs))
	todo := make([]int, len(jobs))
	for i, j := range jobs {
		apps[i], todo[i] = j.next(1), i
	}
	for len(todo) > 0 {
		group := make([]eventstore.Append, len(todo))
		for k, i := range todo {
			group[k] = apps[i]
		}
		var again []int
		for k, r := range es.AppendMany(ctx, group) {
			i := todo[k]
			switch {
			case errors.Is(r.Err, eventstore.ErrUnknownOutcome) && ctx.Err() == nil:
				again = append(again, i)
			case r.Err != nil:
				return fmt.Errorf("group commit, job %s: %w", jobs[i].id, r.Err)
			default:
				jobs[i].acked(apps[i], r.Version)
			}
		}
		todo = again
	}
	return nil
}

// writers keeps appending while fault runs: to every job of jobs from its
// own goroutine (one event, then an atomic pair, in turn), and to all the
// jobs of group at once in group commits of one event each, from one
// more. fault is called once every writer has some acknowledged appends,
// and the writers stop once every one has some more after it.
func writers(t *testing.T, ctx context.Context, es *nats.EventStore, jobs, group []*jobLog, fault func()) {
	t.Helper()
	var steps []func(k int) error
	for _, j := range jobs {
		steps = append(steps, func(k int) error { return appendUntilKnown(ctx, es, j, 1+k%2) })
	}
	if len(group) > 0 {
		steps = append(steps, func(int) error { return appendGroupUntilKnown(ctx, es, group) })
	}
	const before, after = 3, 3
	var (
		mu     sync.Mutex
		cond   = sync.NewCond(&mu)
		counts = make([]int, len(steps))
		stop   bool
		failed bool
		errs   = make([]error, len(steps))
		wg     sync.WaitGroup
	)
	for i, step := range steps {
		wg.Go(func() {
			for k := 0; ; k++ {
				mu.Lock()
				done := stop
				mu.Unlock()
				if done {
					return
				}
				if err := step(k); err != nil {
					errs[i] = err
					mu.Lock()
					failed = true
					cond.Broadcast()
					mu.Unlock()
					return
				}
				mu.Lock()
				counts[i]++
				cond.Broadcast()
				mu.Unlock()
			}
		})
	}
	// waitAll waits until every writer has n more appends than at
	// start, or one failed.
	waitAll := func(n int) bool {
		mu.Lock()
		defer mu.Unlock()
		start := slices.Clone(counts)
		for !failed {
			behind := false
			for i := range counts {
				behind = behind || counts[i] < start[i]+n
			}
			if !behind {
				return true
			}
			cond.Wait()
		}
		return false
	}
	if waitAll(before) {
		fault()
		waitAll(after)
	}
	mu.Lock()
	stop = true
	mu.Unlock()
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// requireAll waits until a read shows every acknowledged event of every
// job (in a cluster a direct get may be served by a replica a moment
// behind), then checks the events themselves.
func requireAll(t *testing.T, es *nats.EventStore, jobs []*jobLog) {
	t.Helper()
	for _, j := range jobs {
		natstest.WaitFor(t, 10*time.Second, func() error {
			got, v, err := es.Load(context.Background(), j.id)
			if err != nil {
				return err
			}
			if v != j.version || len(got) != len(j.events) {
				return fmt.Errorf("job %s: read %d events up to %d, acknowledged %d up to %d", j.id, len(got), v, len(j.events), j.version)
			}
			return nil
		})
		got, _, err := es.Load(context.Background(), j.id)
		require.NoError(t, err)
		require.Equal(t, j.events, got)
	}
}
