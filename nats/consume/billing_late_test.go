package consume_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
	"github.com/stretchr/testify/require"
)

// shiftedClock is the wall clock moved on by whatever Advance added: the
// sandbox's, so a test decides when its late charges fall due.
type shiftedClock struct{ offset atomic.Int64 }

func (c *shiftedClock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *shiftedClock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// watchedAPI is the real client, noting every key sent and when the ledger
// answered with no entry.
type watchedAPI struct {
	*serper.Client
	mu      sync.Mutex
	keys    []string
	empties []time.Time
}

func (w *watchedAPI) Search(ctx context.Context, key string, body []byte) serper.Result {
	w.mu.Lock()
	if !slices.Contains(w.keys, key) {
		w.keys = append(w.keys, key)
	}
	w.mu.Unlock()
	return w.Client.Search(ctx, key, body)
}

func (w *watchedAPI) Ledger(ctx context.Context, q serper.LedgerQuery) ([]serper.LedgerEntry, error) {
	entries, err := w.Client.Ledger(ctx, q)
	if err == nil && len(entries) == 0 {
		w.mu.Lock()
		w.empties = append(w.empties, time.Now())
		w.mu.Unlock()
	}
	return entries, err
}

// sent returns the distinct keys sent, in order, and how many empty ledger
// answers came after since.
func (w *watchedAPI) sent(since time.Time) (keys []string, emptyAfter int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	keys = slices.Clone(w.keys)
	for _, at := range w.empties {
		if at.After(since) {
			emptyAfter++
		}
	}
	return keys, emptyAfter
}

// TestLedgerBehindTheDeadlineOnJetStream: every search is answered 503
// billing_unavailable and charged only long after (the sandbox's BillingLate
// fault, its delay an hour on a clock the test moves), so every resend of the
// key gets billing_unavailable again until the key's deadline, and the job
// reaches reconciliation with an empty ledger. The engine must not take the
// empty ledger for "not charged" and buy again under a new key: it asks again
// until the charge shows, then ends charged_no_result. One search billed, one
// key ever sent.
func TestLedgerBehindTheDeadlineOnJetStream(t *testing.T) {
	t.Parallel()
	l := setupLive(t, sandbox.Faults{})
	clock := &shiftedClock{}
	sb := sandbox.New(sandbox.Config{Seed: 1, Now: clock.Now, BillingDelay: time.Hour,
		Faults: sandbox.Faults{BillingLate: 1}})
	url, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	client, err := serper.New(serper.Config{BaseURL: url, Token: sandbox.DefaultToken, Timeout: 5 * time.Second, AllowShortTimeout: true})
	require.NoError(t, err)
	t.Cleanup(client.CloseIdleConnections)
	api := &watchedAPI{Client: client}

	// A key may be sent for 1.5 s after its first send; the ledger is then
	// asked once the lease of the last send is over, and again every
	// max_delay (200 ms) while it shows nothing.
	policy := testPolicy()
	policy.ReplayWindow = events.Duration(2 * time.Second)
	policy.SafetyMargin = events.Duration(500 * time.Millisecond)
	eng, err := engine.New(engine.Config{Name: "w1", Store: l.store, API: api, Timers: snats.NewTimers(l.srv.JS, nil),
		Policy: policy, ReconcileRetry: 100 * time.Millisecond})
	require.NoError(t, err)
	l.start(eng, 2)
	l.publish(cmdFor(1))
	job := jobFor(t, cmdFor(1))

	// Wait until the engine, reconciling past the last send's lease (so a
	// search of the key can no longer be running), has found the ledger
	// empty twice; a second key sent meanwhile is the double purchase this
	// test is about.
	var rotated error
	natstest.WaitFor(t, 30*time.Second, func() error {
		evs, _, err := l.store.Load(context.Background(), job)
		if err != nil {
			return err
		}
		s := aggregate.Fold(evs)
		keys, empties := api.sent(s.Settled())
		if len(keys) > 1 || sb.Stats().Executions > 1 {
			rotated = fmt.Errorf("a second key was sent on an empty ledger: keys %v, job %q", keys, s.Status)
			return nil
		}
		if s.Status != aggregate.StatusReconciling || empties < 2 {
			return fmt.Errorf("job %q, %d empty ledger answers after its last lease", s.Status, empties)
		}
		return nil
	})
	require.NoError(t, rotated)
	st := sb.Stats()
	require.Zero(t, st.Charges, "the charge is still late")
	require.Equal(t, 1, st.Faults[sandbox.FaultBillingLate])

	clock.Advance(time.Hour) // the charge falls due: the next ledger query shows it
	s := l.waitTerminal([]string{job}, 30*time.Second)[job]
	require.Equal(t, aggregate.StatusChargedNoResult, s.Status)
	require.Len(t, s.Attempts, 1, "never a new key")
	keys, _ := api.sent(time.Time{})
	require.Equal(t, []string{s.Attempts[0].Key}, keys, "no second key was ever sent")

	st = sb.Stats()
	require.Equal(t, 1, st.Executions)
	require.Equal(t, 1, st.Charges, "one search billed")
	require.Equal(t, map[string]int{s.Attempts[0].Key: 1}, st.ChargesPerKey)
	require.Equal(t, 1, st.MaxChargesPerBody)
	t.Logf("sends %d, resends answered billing_unavailable while unsettled %d", s.Sends, st.BillingUnsettled)

	evs, _, err := l.store.Load(context.Background(), job)
	require.NoError(t, err)
	require.Empty(t, aggregate.Verify(evs))
	var rec events.Reconciled
	for _, e := range evs {
		if r, ok := e.Data.(events.Reconciled); ok {
			rec = r
		}
	}
	require.Equal(t, aggregate.VerdictCharged, rec.Verdict)
	require.Equal(t, 1, rec.Charges)
}
