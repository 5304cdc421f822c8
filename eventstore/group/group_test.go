package group_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/group"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/eventstore/storetest"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// committed is a Committer that also passes through what the suite's size
// and corruption tests need from the store behind it.
type committed struct {
	*group.Committer
	inner *memstore.Store
}

func (c committed) MaxMessageSize() int { return c.inner.MaxMessageSize() }
func (c committed) WriteRaw(ctx context.Context, jobID string, data []byte) (uint64, error) {
	return c.inner.WriteRaw(ctx, jobID, data)
}

// TestConformance: a committer in front of a store is still a store, as
// strict as the one behind it.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store {
		inner := memstore.New(memstore.Options{})
		c := group.New(inner, group.Options{})
		t.Cleanup(c.Close)
		return committed{Committer: c, inner: inner}
	})
}

// TestConcurrentAppendsShareCommits: many writers at once end up in few
// commits, and every one of them gets its own answer.
func TestConcurrentAppendsShareCommits(t *testing.T) {
	inner := memstore.New(memstore.Options{})
	release := make(chan struct{})
	var once sync.Once
	slow := &gated{Store: inner, gate: release}
	var mu sync.Mutex
	var commits, biggest int
	c := group.New(slow, group.Options{OnCommit: func(appends, _ int, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		commits++
		biggest = max(biggest, appends)
	}})
	defer c.Close()
	const writers = 200
	var wg sync.WaitGroup
	versions := make([]uint64, writers)
	errs := make([]error, writers)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := storetest.NewJobID()
			versions[i], errs[i] = c.Append(context.Background(), job, 0, storetest.NewEvent(job, 1))
		}()
	}
	// Let the first commit go once everyone has queued behind it.
	defer once.Do(func() { close(release) })
	require.Eventually(t, func() bool { return slow.holding()+c.Queued() == writers }, 5*time.Second, time.Millisecond)
	once.Do(func() { close(release) })
	wg.Wait()
	for i := range errs {
		require.NoError(t, errs[i])
		require.NotZero(t, versions[i])
	}
	mu.Lock()
	defer mu.Unlock()
	require.Less(t, commits, writers/4, "appends were grouped")
	require.LessOrEqual(t, commits, 2+writers/1000+1)
	require.Greater(t, biggest, 10)
}

// TestConflictStaysWithItsJob: a stale append in a group fails alone.
func TestConflictStaysWithItsJob(t *testing.T) {
	inner := memstore.New(memstore.Options{})
	c := group.New(inner, group.Options{})
	defer c.Close()
	ctx := context.Background()
	stale := storetest.NewJobID()
	v, err := c.Append(ctx, stale, 0, storetest.NewEvent(stale, 1))
	require.NoError(t, err)
	res := c.AppendMany(ctx, []eventstore.Append{
		{JobID: stale, Expected: 0, Events: []events.Event{storetest.NewEvent(stale, 1)}},
		func() eventstore.Append {
			j := storetest.NewJobID()
			return eventstore.Append{JobID: j, Events: []events.Event{storetest.NewEvent(j, 1)}}
		}(),
		{JobID: stale, Expected: v, Events: []events.Event{storetest.NewEvent(stale, 2)}},
	})
	require.ErrorIs(t, res[0].Err, eventstore.ErrConcurrency)
	require.NoError(t, res[1].Err)
	require.NoError(t, res[2].Err)
}

func TestClosedCommitterRefuses(t *testing.T) {
	c := group.New(memstore.New(memstore.Options{}), group.Options{})
	c.Close()
	c.Close()
	job := storetest.NewJobID()
	_, err := c.Append(context.Background(), job, 0, storetest.NewEvent(job, 1))
	require.ErrorIs(t, err, group.ErrClosed)
}

// gated holds every AppendMany until the gate opens.
type gated struct {
	*memstore.Store
	gate chan struct{}
	mu   sync.Mutex
	held int
}

func (g *gated) AppendMany(ctx context.Context, a []eventstore.Append) []eventstore.Result {
	g.mu.Lock()
	g.held += len(a)
	g.mu.Unlock()
	<-g.gate
	return g.Store.AppendMany(ctx, a)
}

// holding is the number of appends of the held commits.
func (g *gated) holding() int { g.mu.Lock(); defer g.mu.Unlock(); return g.held }
