package sim

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/chaos"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// chargedAsLogged fails the test if the provider charged the job other than
// its log accounts for, or if the log breaks a rule of aggregate.Verify:
// either is a broken promise whatever its cause. The bug the test plays
// (a chaos.Bug* name) only names the failure when the job's log and charges
// have that bug's signature (chaos.ClassifyCharge); a double charge of
// another shape fails all the same.
func (b *bench) chargedAsLogged(bug string) {
	b.t.Helper()
	evs, _, err := b.store.Load(context.Background(), b.job)
	require.NoError(b.t, err)
	if charges, accounted := b.charges(), chaos.Accounted(evs, aggregate.Fold(evs)); charges != accounted {
		what := fmt.Sprintf("the provider charged the job %d times; its log accounts for %d", charges, accounted)
		if got := b.classify(); got == bug {
			b.t.Fatalf("bug %s is back: %s", bug, what)
		} else {
			b.t.Fatalf("%s (without the signature of %s: classified %q)", what, bug, got)
		}
	}
	if v := aggregate.Verify(evs); len(v) > 0 {
		b.t.Fatalf("the job's log breaks the engine's rules: %v", v)
	}
}

// bench is one job, the real engine, the real sandbox through the real
// client, and the in-memory store, on a synctest bubble's clock, with no
// scheduler: the test plays the interleaving by hand, with the engine's
// crash hooks as pause points.
type bench struct {
	t      *testing.T
	sb     *sandbox.Server
	client *serper.Client
	store  *memstore.Store
	cut    time.Duration // the next search's connection is reset after this
	mu     sync.Mutex
	job    string
}

func newBench(t *testing.T, cfg sandbox.Config) *bench {
	cfg.Now, cfg.Logger = time.Now, slog.New(slog.DiscardHandler)
	sb := sandbox.New(cfg)
	client, err := serper.New(serper.Config{BaseURL: "http://sandbox.sim", Token: sandbox.DefaultToken,
		Transport: inProcess{sb}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	return &bench{t: t, sb: sb, client: client, store: memstore.New(memstore.Options{})}
}

// Search is the sandbox through the client, with the connection reset
// after b.cut if it is set (once).
func (b *bench) Search(ctx context.Context, key string, body []byte) serper.Result {
	b.mu.Lock()
	cut := b.cut
	b.cut = 0
	b.mu.Unlock()
	if cut > 0 {
		var stop func()
		ctx, stop = withCut(ctx, cut)
		defer stop()
	}
	return b.client.Search(ctx, key, body)
}

func (b *bench) Ledger(ctx context.Context, q serper.LedgerQuery) ([]serper.LedgerEntry, error) {
	return b.client.Ledger(ctx, q)
}

func (b *bench) Arm(context.Context, string, time.Time) error { return nil }

func (b *bench) engine(name string, hooks engine.Hooks) *engine.Engine {
	eng, err := engine.New(engine.Config{Name: name, Store: b.store, API: b, Timers: b, Hooks: hooks,
		IDs: newIDs(1, uint64(len(name)), time.Now), Now: time.Now})
	require.NoError(b.t, err)
	return eng
}

func (b *bench) schedule(eng *engine.Engine) string {
	out, err := eng.Schedule(context.Background(), []byte(`{"slot":"2000-01-01T00:00:00Z","query":"espresso scale","country":"US","language":"en","device":"mobile"}`), "test")
	require.NoError(b.t, err)
	b.job = out.JobID
	return out.JobID
}

// stepToEnd steps the job with eng, letting fake time run to each wake-up,
// until it is finished.
func (b *bench) stepToEnd(eng *engine.Engine) aggregate.State {
	for range 200 {
		next, err := eng.Step(context.Background(), b.job, nil)
		require.NoError(b.t, err)
		if next.Step == aggregate.StepDone {
			return b.state()
		}
		time.Sleep(time.Until(next.At))
	}
	b.t.Fatal("the job did not finish")
	return aggregate.State{}
}

func (b *bench) state() aggregate.State {
	evs, _, err := b.store.Load(context.Background(), b.job)
	require.NoError(b.t, err)
	return aggregate.Fold(evs)
}

// charges is what the provider charged for the job's body.
func (b *bench) charges() int {
	return b.sb.Stats().ChargesPerBody[b.state().BodySHA256]
}

// classify names the known bug the job's log and charges show.
func (b *bench) classify() string {
	evs, _, err := b.store.Load(context.Background(), b.job)
	require.NoError(b.t, err)
	return chaos.ClassifyCharge(evs, b.sb.Stats().ChargesPerKey, func() []string {
		var keys []string
		for _, a := range aggregate.Fold(evs).Attempts {
			keys = append(keys, a.Key)
		}
		entries, err := b.client.Ledger(context.Background(), serper.LedgerQuery{Keys: keys})
		require.NoError(b.t, err)
		var ids []string
		for _, e := range entries {
			ids = append(ids, e.RequestID)
		}
		return ids
	})
}

// frozen is a crash hook that stops its worker right there until let go:
// a process paused between two steps.
type frozen struct {
	reached, release chan struct{}
	once             sync.Once
}

func newFrozen() *frozen { return &frozen{reached: make(chan struct{}), release: make(chan struct{})} }

func (f *frozen) hook(string) error {
	first := false
	f.once.Do(func() { first = true })
	if first {
		close(f.reached)
		<-f.release
	}
	return nil
}

// run steps the job with eng in the background; wait for its end with the
// returned function.
func (b *bench) run(eng *engine.Engine) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = eng.Step(context.Background(), b.job, nil)
	}()
	return func() { <-done }
}

// TestBugStaleTryRotatesKey: worker A sends the key and gets a confirmed
// 429 (the request did not run, and the provider did not record the key),
// then freezes before recording it. Its lease runs out; worker B resends
// the same key, which now runs and is billed, and freezes too. A wakes and
// records its 429: the aggregate takes a confirmed answer from an older
// try as settling the key, and rotates it while B's try ran. B's success
// is then stale, and the new key is bought again: two charges for one job
// (promises 2 and 4). Found by the simulation (seeds 1058, 1132, 5020...).
func TestBugStaleTryRotatesKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBench(t, sandbox.Config{Seed: 1})
		fa := newFrozen()
		engA := b.engine("a", engine.Hooks{AfterSearch: fa.hook})
		b.schedule(engA)
		b.sb.SetFaults(sandbox.Faults{RateLimited429: 1})
		waitA := b.run(engA)
		<-fa.reached // A has its 429 for try 1
		b.sb.SetFaults(sandbox.Faults{})
		time.Sleep(aggregate.DefaultPolicy().Lease.D() + time.Second)
		fb := newFrozen()
		engB := b.engine("b", engine.Hooks{AfterSearch: fb.hook})
		waitB := b.run(engB)
		<-fb.reached // B's try 2 ran the search
		close(fa.release)
		waitA()
		close(fb.release)
		waitB()
		s := b.stepToEnd(b.engine("c", engine.Hooks{}))
		require.Equal(t, aggregate.StatusSucceeded, s.Status)
		b.chargedAsLogged(chaos.BugStaleTryRotates)
	})
}

// TestBugStaleSuccessHidesCharge: worker A's search has zero results (free,
// not billed) and the provider drops its cached response early; A freezes
// before recording it. Its lease runs out; worker B resends the key, which
// the provider no longer knows (unbilled, expired), so it runs the search
// again, this time with results, and bills it; B freezes too. A wakes and
// stores its free, empty result: the job succeeded with nothing bought,
// and B's charge is in no event (promise 6: the log alone cannot account
// for what was bought).
func TestBugStaleSuccessHidesCharge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBench(t, sandbox.Config{Seed: 1})
		fa := newFrozen()
		engA := b.engine("a", engine.Hooks{AfterSearch: fa.hook})
		b.schedule(engA)
		b.sb.SetFaults(sandbox.Faults{ZeroResults: 1, EarlyExpiry: 1})
		waitA := b.run(engA)
		<-fa.reached
		b.sb.SetFaults(sandbox.Faults{})
		time.Sleep(aggregate.DefaultPolicy().Lease.D() + time.Second)
		fb := newFrozen()
		engB := b.engine("b", engine.Hooks{AfterSearch: fb.hook})
		waitB := b.run(engB)
		<-fb.reached
		close(fa.release)
		waitA()
		close(fb.release)
		waitB()
		s := b.state()
		require.Equal(t, aggregate.StatusSucceeded, s.Status)
		b.chargedAsLogged(chaos.BugStaleSuccessHidesCharge)
	})
}

// TestBugReconcileWhileRunning: within the provider's contract (a search
// takes 60 s, under the 90 s limit; the client waits 100 s). Every send of
// the key is dropped before the search runs until shortly before the key's
// deadline; then one reaches the API and its search starts, but the
// connection is reset 10 s in (a network blip): an unknown outcome. The
// key's deadline comes while the search still runs; the engine asks the
// billing ledger at once, finds nothing yet, and buys under a new key. The
// first search is billed when it ends: two charges (promises 2 and 4). A
// reconciliation must not conclude "not charged" while a request of the
// key may still be running (the last send's lease, which covers the
// longest search, has not run out).
func TestBugReconcileWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBench(t, sandbox.Config{Seed: 1, SearchTime: 60 * time.Second})
		eng := b.engine("a", engine.Hooks{})
		b.schedule(eng)
		b.sb.SetFaults(sandbox.Faults{DropBeforeSearch: 1})
		for {
			next, err := eng.Step(context.Background(), b.job, nil)
			require.NoError(t, err)
			cur, _ := b.state().Current()
			if next.At.After(cur.Deadline.Add(-40 * time.Second)) {
				break
			}
			time.Sleep(time.Until(next.At))
		}
		cur, _ := b.state().Current()
		time.Sleep(time.Until(cur.Deadline.Add(-40 * time.Second)))
		b.sb.SetFaults(sandbox.Faults{})
		b.mu.Lock()
		b.cut = 10 * time.Second
		b.mu.Unlock()
		s := b.stepToEnd(eng)
		time.Sleep(2 * time.Minute) // every search has ended and been billed
		b.chargedAsLogged(chaos.BugReconcileWhileRunning)
		// The ledger was asked once the cut search had ended: it found the
		// charge, and the response is lost.
		require.Equal(t, aggregate.StatusChargedNoResult, s.Status)
		require.Equal(t, 1, b.charges())
	})
}
