package sandbox_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

func TestFreePagesThenPrice(t *testing.T) {
	e := setup(t, sandbox.Config{FreePages: 3, PriceMicros: 2500})
	k1, k2, k3 := uuid.NewString(), uuid.NewString(), uuid.NewString()
	twoPages := `{"query":"espresso scale","limit":20}`
	r1 := e.search(k1, twoPages)
	r2 := e.search(k2, `{"query":"milk jug","limit":20}`)
	require.Equal(t, http.StatusOK, r1.status)
	require.Equal(t, http.StatusOK, r2.status)
	require.Equal(t, http.StatusOK, e.search(k3, `{"query":"zero-results: grinder"}`).status)

	entries := e.ledger("idempotencyKey=" + k1 + "&idempotencyKey=" + k2 + "," + k3)
	require.Len(t, entries, 2, "zero-result searches are free and have no entry")
	require.Equal(t, []int{2, 1}, []int{entries[0].FreePages, entries[1].FreePages})
	require.Equal(t, []int{0, 1}, []int{entries[0].BilledPages, entries[1].BilledPages})
	require.Equal(t, []int64{0, 2500}, []int64{entries[0].AmountMicros, entries[1].AmountMicros})
	require.Equal(t, r1.header.Get("X-Request-Id"), entries[0].RequestID)
	require.Equal(t, k1, entries[0].IdempotencyKey)
	require.Equal(t, e.clock.Now(), entries[0].At)
	require.Len(t, entries[0].BodySHA256, 64)

	byID := e.ledger("requestId=" + r2.header.Get("X-Request-Id"))
	require.Equal(t, entries[1:], byID)

	st := e.srv.Stats()
	require.Equal(t, 2, st.Charges)
	require.Equal(t, 4, st.Pages)
	require.Equal(t, 3, st.FreePagesUsed)
	require.Equal(t, 1, st.BilledPages)
	require.Equal(t, int64(2500), st.AmountMicros)
	require.Equal(t, 1, st.MaxChargesPerBody)
	require.Empty(t, st.BodiesChargedTwice)
}

func TestChargesPerBody(t *testing.T) {
	e := setup(t, sandbox.Config{})
	// Two keys with one body: the double purchase the engine must prevent.
	require.Equal(t, http.StatusOK, e.search(uuid.NewString(), espresso).status)
	require.Equal(t, http.StatusOK, e.search(uuid.NewString(), espresso).status)
	st := e.srv.Stats()
	require.Equal(t, 2, st.MaxChargesPerBody)
	require.Len(t, st.BodiesChargedTwice, 1)
	require.Equal(t, 2, st.ChargesPerBody[st.BodiesChargedTwice[0]])
}

func TestLedgerQueries(t *testing.T) {
	e := setup(t, sandbox.Config{})
	tests := []struct {
		name   string
		query  string
		status int
	}{
		{"no filter", "", http.StatusUnprocessableEntity},
		{"empty values", "idempotencyKey=,&requestId=", http.StatusUnprocessableEntity},
		{"too many", "requestId=" + strings.Repeat("r,", 201), http.StatusUnprocessableEntity},
		{"unknown key", "idempotencyKey=" + uuid.NewString(), http.StatusOK},
		{"a day without charges", "day=1999-01-01", http.StatusOK},
		{"a day that is no date", "day=yesterday", http.StatusUnprocessableEntity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.get("/v1/billing/ledger?" + tt.query)
			require.Equal(t, tt.status, r.status, "%s", r.body)
			if tt.status == http.StatusOK {
				require.JSONEq(t, `{"entries":[]}`, string(r.body))
			}
		})
	}
	e.token = "wrong-token"
	require.Equal(t, http.StatusUnauthorized, e.get("/v1/billing/ledger?requestId=x").status)
}

func TestStatsEndpoint(t *testing.T) {
	e := setup(t, sandbox.Config{})
	require.Equal(t, http.StatusOK, e.search(uuid.NewString(), espresso).status)
	r := e.get("/v1/sandbox/stats")
	require.Equal(t, http.StatusOK, r.status)
	m := r.json(t)
	require.Equal(t, float64(1), m["executions"])
	require.Equal(t, float64(1), m["charges"])
	require.Equal(t, float64(1), m["maxChargesPerBody"])
	require.Equal(t, []any{}, m["bodiesChargedTwice"])
}

// TestBillingLate walks a key hit by BillingLate through its delay on the
// fake clock: the ledger is empty and resends get 503 billing_unavailable
// until BillingDelay after the search ended; then the charge is in the
// ledger, dated then, and resends replay the 200.
func TestBillingLate(t *testing.T) {
	e := setup(t, sandbox.Config{Faults: sandbox.Faults{BillingLate: 1}})
	start := e.clock.Now()
	key := uuid.NewString()
	first := e.search(key, espresso)
	require.NoError(t, first.err)
	require.Equal(t, http.StatusServiceUnavailable, first.status, "%s", first.body)
	require.Equal(t, "billing_unavailable", first.errorField(t, "code"))
	id := first.header.Get("X-Request-Id")
	require.Equal(t, id, first.errorField(t, "requestId"))
	e.srv.SetFaults(sandbox.Faults{})

	unsettled := func(resends int) {
		t.Helper()
		require.Empty(t, e.ledger("idempotencyKey="+key), "the charge is not in the ledger yet")
		require.Empty(t, e.ledger("requestId="+id))
		r := e.search(key, espresso)
		require.NoError(t, r.err)
		require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
		require.Equal(t, "billing_unavailable", r.errorField(t, "code"))
		require.Equal(t, id, r.errorField(t, "requestId"), "the execution's request id")
		require.Empty(t, r.header.Get("Idempotent-Replayed"), "the 503 is not the cached response")
		st := e.srv.Stats()
		require.Zero(t, st.Charges)
		require.Equal(t, 1, st.Executions, "never a second execution of the key")
		require.Equal(t, resends, st.BillingUnsettled)
		require.Zero(t, st.Replays)
	}
	unsettled(1)
	e.clock.Advance(sandbox.DefaultBillingDelay - time.Nanosecond)
	unsettled(2)

	e.clock.Advance(time.Nanosecond)
	entries := e.ledger("idempotencyKey=" + key)
	require.Len(t, entries, 1)
	require.Equal(t, id, entries[0].RequestID)
	require.Equal(t, 1, entries[0].Pages)
	require.Equal(t, start.Add(sandbox.DefaultBillingDelay), entries[0].At, "dated when it fell due")
	require.Equal(t, entries, e.ledger("requestId="+id))

	again := e.search(key, espresso)
	require.NoError(t, again.err)
	require.Equal(t, http.StatusOK, again.status, "%s", again.body)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, id, again.json(t)["requestId"])
	st := e.srv.Stats()
	require.Equal(t, 1, st.Executions)
	require.Equal(t, 1, st.Charges)
	require.Equal(t, 1, st.ChargesPerKey[key])
	require.Equal(t, 1, st.Replays)
	require.Equal(t, 2, st.BillingUnsettled)
	require.Equal(t, 1, st.Faults[sandbox.FaultBillingLate])
	require.Equal(t, 1, st.Faults[sandbox.FaultBillingUnavailable503], "BillingLate implies the 503")
}

// TestBillingLatePastTheWindow: a key whose charge is late is not forgotten
// when its replay window ends first; it answers 503 billing_unavailable until
// the charge is written, then 409 idempotency_replay_unavailable.
func TestBillingLatePastTheWindow(t *testing.T) {
	e := setup(t, sandbox.Config{ReplayWindow: time.Minute, BillingDelay: 5 * time.Minute,
		Faults: sandbox.Faults{BillingLate: 1, EarlyExpiry: 1}})
	key := uuid.NewString()
	first := e.search(key, espresso)
	require.Equal(t, http.StatusServiceUnavailable, first.status, "%s", first.body)
	e.srv.SetFaults(sandbox.Faults{})

	e.clock.Advance(2 * time.Minute)
	r := e.search(key, espresso)
	require.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
	require.Equal(t, "billing_unavailable", r.errorField(t, "code"))

	e.clock.Advance(3 * time.Minute)
	r = e.search(key, espresso)
	require.Equal(t, http.StatusConflict, r.status, "%s", r.body)
	require.Equal(t, "idempotency_replay_unavailable", r.errorField(t, "code"))
	require.Equal(t, first.header.Get("X-Request-Id"), r.errorField(t, "requestId"))
	st := e.srv.Stats()
	require.Equal(t, 1, st.Executions)
	require.Zero(t, st.Forgotten)
	require.Equal(t, 1, st.Charges)
	require.Len(t, e.ledger("idempotencyKey="+key), 1)
}

// TestBillingLateFreePagesInDueOrder: a late charge takes the free pages
// left when it falls due, before a search that ends after that.
func TestBillingLateFreePagesInDueOrder(t *testing.T) {
	e := setup(t, sandbox.Config{FreePages: 1, BillingDelay: time.Minute, Faults: sandbox.Faults{BillingLate: 1}})
	late, prompt := uuid.NewString(), uuid.NewString()
	require.Equal(t, http.StatusServiceUnavailable, e.search(late, espresso).status)
	e.srv.SetFaults(sandbox.Faults{})
	e.clock.Advance(time.Minute)
	require.Equal(t, http.StatusOK, e.search(prompt, `{"query":"milk jug"}`).status)
	entries := e.ledger("idempotencyKey=" + late + "," + prompt)
	require.Len(t, entries, 2)
	require.Equal(t, []string{late, prompt}, []string{entries[0].IdempotencyKey, entries[1].IdempotencyKey})
	require.Equal(t, []int{1, 0}, []int{entries[0].FreePages, entries[1].FreePages})
}

// TestBillingLateOnlyChargedSearches: a search with nothing to bill has no
// charge to be late; BillingLate leaves it alone.
func TestBillingLateOnlyChargedSearches(t *testing.T) {
	e := setup(t, sandbox.Config{Faults: sandbox.Faults{BillingLate: 1}})
	key := uuid.NewString()
	require.Equal(t, http.StatusOK, e.search(key, `{"query":"zero-results: grinder"}`).status)
	r := e.search(key, `{"query":"zero-results: grinder"}`)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	st := e.srv.Stats()
	require.Zero(t, st.Faults[sandbox.FaultBillingLate])
	require.Zero(t, st.Faults[sandbox.FaultBillingUnavailable503])
	require.Zero(t, st.BillingUnsettled)
}

// TestLedgerExportByDay: day=D lists every charge of that UTC day, the
// full export serpent audit --ledger-file reads.
func TestLedgerExportByDay(t *testing.T) {
	e := setup(t, sandbox.Config{})
	k1, k2, k3 := uuid.NewString(), uuid.NewString(), uuid.NewString()
	require.Equal(t, http.StatusOK, e.search(k1, espresso).status)
	require.Equal(t, http.StatusOK, e.search(k2, `{"query":"milk jug"}`).status)
	e.clock.Advance(24 * time.Hour)
	require.Equal(t, http.StatusOK, e.search(k3, `{"query":"grinder"}`).status)

	keys := func(entries []sandbox.LedgerEntry) []string {
		var out []string
		for _, en := range entries {
			out = append(out, en.IdempotencyKey)
		}
		return out
	}
	require.Equal(t, []string{k1, k2}, keys(e.ledger("day=2025-03-01")))
	require.Equal(t, []string{k3}, keys(e.ledger("day=2025-03-02")))
	require.Equal(t, []string{k1, k2, k3}, keys(e.ledger("day=2025-03-01,2025-03-02")))
	require.Empty(t, e.ledger("day=2025-03-03"))
}
