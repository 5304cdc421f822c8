package sandbox_test

import (
	"net/http"
	"strings"
	"testing"

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
