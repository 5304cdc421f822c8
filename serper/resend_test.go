package serper_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// step is one send of a journey: the faults in force, and what the client
// must report. When after is set it runs after the send (to wait or move
// the clock).
type step struct {
	faults  sandbox.Faults
	unknown string // expected Unknown reason, or "" for a confirmed reply
	status  int
	code    string
	after   func(h *harness)
}

// TestResendThroughEveryFault walks one key per journey through the faults,
// resending the same key and body as the engine does, and shows that every
// journey was charged exactly once, in the ledger and in the stats.
func TestResendThroughEveryFault(t *testing.T) {
	// A second's client timeout (an ordinary reply is far quicker even on a
	// loaded machine) and a slow search that outlasts it by seconds, so
	// the resend after the timeout finds it still running.
	h := setup(t, sandbox.Config{SlowSearchTime: 4 * time.Second}, time.Second)
	ok := step{status: 200}
	journeys := []struct {
		name  string
		steps []step
		last  string // the action of the last step
	}{
		{"drop before, 502, slow, in progress, drop, 502, replay", []step{
			{faults: sandbox.Faults{DropBeforeSearch: 1}, unknown: serper.UnknownConnection},
			{faults: sandbox.Faults{GatewayPage502: 1}, unknown: serper.UnknownGatewayPage},
			{faults: sandbox.Faults{SlowSearch: 1}, unknown: serper.UnknownTimeout},
			{status: 409, code: serper.CodeIdempotencyInProgress, after: (*harness).waitIdle},
			{faults: sandbox.Faults{DropBeforeSearch: 1}, unknown: serper.UnknownConnection},
			{faults: sandbox.Faults{GatewayPage502: 1, RateLimited429: 1}, unknown: serper.UnknownGatewayPage},
			{faults: sandbox.Faults{RateLimited429: 1, Timeout408: 1}, status: 200},
		}, store},
		{"drop after, replay", []step{{faults: sandbox.Faults{DropAfterSearch: 1}, unknown: serper.UnknownConnection}, ok}, store},
		{"504 after the search, replay", []step{{faults: sandbox.Faults{GatewayPage504: 1}, unknown: serper.UnknownGatewayPage}, ok}, store},
		{"billing unavailable, replay", []step{{faults: sandbox.Faults{BillingUnavailable503: 1}, status: 503, code: serper.CodeBillingUnavailable}, ok}, store},
		{"billing unavailable, then early expiry", []step{
			{faults: sandbox.Faults{BillingUnavailable503: 1, EarlyExpiry: 1}, status: 503, code: serper.CodeBillingUnavailable},
			{status: 409, code: serper.CodeIdempotencyReplayUnavailable},
		}, reconcile},
		{"drop after, early expiry", []step{
			{faults: sandbox.Faults{DropAfterSearch: 1, EarlyExpiry: 1}, unknown: serper.UnknownConnection},
			{status: 409, code: serper.CodeIdempotencyReplayUnavailable},
		}, reconcile},
		{"drop after, past the window", []step{
			{faults: sandbox.Faults{DropAfterSearch: 1}, unknown: serper.UnknownConnection, after: func(h *harness) { h.clock.Advance(15 * time.Minute) }},
			{status: 409, code: serper.CodeIdempotencyReplayUnavailable},
		}, reconcile},
	}
	for i, j := range journeys {
		t.Run(j.name, func(t *testing.T) {
			key, b := newKey(), body(i)
			var got serper.Result
			for n, s := range j.steps {
				h.sb.SetFaults(s.faults)
				got = h.search(key, b)
				require.Equal(t, s.unknown, got.Unknown, "step %d: %+v", n, got)
				require.Equal(t, s.status, got.Status, "step %d", n)
				require.Equal(t, s.code, got.Code, "step %d", n)
				if n < len(j.steps)-1 {
					require.Equal(t, sameKey, nextAction(got), "step %d: every step but the last keeps the key", n)
				}
				if s.after != nil {
					s.after(h)
				}
			}
			require.Equal(t, j.last, nextAction(got))
			entries := h.ledger(key)
			require.Len(t, entries, 1, "exactly one charge for the key")
			if got.OK() {
				require.True(t, got.Replayed, "the final 200 is the first execution's response, replayed")
				require.Equal(t, entries[0].RequestID, got.RequestID)
			} else {
				// Reconciliation: the ledger finds the charge by the
				// original request id too, once.
				byID, err := h.client.Ledger(context.Background(), serper.LedgerQuery{Keys: []string{key}, RequestIDs: []string{got.RequestID}})
				require.NoError(t, err)
				require.Equal(t, entries, byID)
			}
		})
	}
	h.sb.SetFaults(sandbox.Faults{})
	st := h.sb.Stats()
	require.Equal(t, len(journeys), st.Executions, "one execution per key, whatever the resends")
	require.Equal(t, len(journeys), st.Charges)
	require.Equal(t, 1, st.MaxChargesPerBody)
	require.Empty(t, st.BodiesChargedTwice)
	require.Zero(t, st.BodyViolations)
}

// TestRetryLoopUnderRandomFaults plays the engine's default table against a
// sandbox with every fault switched on (but slow searches): each job ends
// stored or reconciled as charged, and no body is ever charged twice.
func TestRetryLoopUnderRandomFaults(t *testing.T) {
	const p = 0.12
	h := setup(t, sandbox.Config{Seed: 42, Faults: sandbox.Faults{DropBeforeSearch: p, DropAfterSearch: p,
		GatewayPage502: p, GatewayPage504: p, Timeout408: p, Failed424: p, Unavailable503: p,
		BillingUnavailable503: p, EarlyExpiry: p, RateLimited429: p, ZeroResults: p}}, time.Second)
	outcomes := map[string]int{}
	for job := range 40 {
		b := body(job)
		keys := []string{newKey()}
		var ids []string
		action := ""
		for try := 0; action != store && action != reconcile; try++ {
			require.Less(t, try, 100, "job %d never settled", job)
			res := h.search(keys[len(keys)-1], b)
			if res.RequestID != "" {
				ids = append(ids, res.RequestID)
			}
			switch action = nextAction(res); action {
			case newKeyAct, waitNew:
				keys = append(keys, newKey())
			case fail:
				t.Fatalf("job %d failed: %+v", job, res)
			}
		}
		outcomes[action]++
		entries, err := h.client.Ledger(context.Background(), serper.LedgerQuery{Keys: keys, RequestIDs: ids})
		require.NoError(t, err)
		require.LessOrEqual(t, len(entries), 1, "job %d charged more than once", job)
		if action == reconcile {
			require.Len(t, entries, 1, "replay unavailable means charged")
		}
	}
	st := h.sb.Stats()
	require.LessOrEqual(t, st.MaxChargesPerBody, 1)
	require.Empty(t, st.BodiesChargedTwice)
	require.Positive(t, outcomes[store])
	t.Logf("outcomes %v; stats: executions %d, charges %d, replays %d, faults %v", outcomes, st.Executions, st.Charges, st.Replays, st.Faults)
}
