package serper_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// TestContract runs the client against the sandbox for every row of the
// outcome table and every fault, and checks exactly the Result the engine
// will see, and the action the default table takes on it.
func TestContract(t *testing.T) {
	tests := []struct {
		name   string
		faults sandbox.Faults
		// prepare may send earlier requests; it returns the key to send.
		prepare func(h *harness) string
		body    []byte
		token   string
		want    serper.Result // RequestID: "" none, "*" any, else exact
		action  string
		rawCode int
	}{
		{name: "200 first execution", want: serper.Result{Confirmed: true, Status: 200, RequestID: "*", Pages: 1}, action: store},
		{name: "200 replayed", prepare: sentOnce(sandbox.Faults{}),
			want: serper.Result{Confirmed: true, Status: 200, RequestID: "original", Pages: 1, Replayed: true}, action: store},
		{name: "200 zero results (fault)", faults: sandbox.Faults{ZeroResults: 1},
			want: serper.Result{Confirmed: true, Status: 200, RequestID: "*"}, action: store},
		{name: "200 zero results (query)", body: []byte(`{"query":"zero-results: x"}`),
			want: serper.Result{Confirmed: true, Status: 200, RequestID: "*"}, action: store},
		{name: "drop before search", faults: sandbox.Faults{DropBeforeSearch: 1},
			want: serper.Result{Unknown: serper.UnknownConnection}, action: sameKey},
		{name: "drop after search", faults: sandbox.Faults{DropAfterSearch: 1},
			want: serper.Result{Unknown: serper.UnknownConnection}, action: sameKey},
		{name: "gateway 502", faults: sandbox.Faults{GatewayPage502: 1},
			want: serper.Result{Unknown: serper.UnknownGatewayPage}, action: sameKey, rawCode: 502},
		{name: "gateway 504", faults: sandbox.Faults{GatewayPage504: 1},
			want: serper.Result{Unknown: serper.UnknownGatewayPage}, action: sameKey, rawCode: 504},
		{name: "slow search: client timeout", faults: sandbox.Faults{SlowSearch: 1},
			want: serper.Result{Unknown: serper.UnknownTimeout}, action: sameKey},
		{name: "409 in progress", prepare: running,
			want: serper.Result{Confirmed: true, Status: 409, Code: serper.CodeIdempotencyInProgress, RequestID: "*"}, action: sameKey},
		{name: "503 billing unavailable", faults: sandbox.Faults{BillingUnavailable503: 1},
			want: serper.Result{Confirmed: true, Status: 503, Code: serper.CodeBillingUnavailable, RequestID: "charged"}, action: sameKey},
		{name: "408 search timeout", faults: sandbox.Faults{Timeout408: 1},
			want: serper.Result{Confirmed: true, Status: 408, Code: serper.CodeSearchTimeout, RequestID: "*"}, action: newKeyAct},
		{name: "408 replayed", prepare: sentOnce(sandbox.Faults{Timeout408: 1}),
			want: serper.Result{Confirmed: true, Status: 408, Code: serper.CodeSearchTimeout, RequestID: "original", Replayed: true}, action: newKeyAct},
		{name: "424 upstream failed", faults: sandbox.Faults{Failed424: 1},
			want: serper.Result{Confirmed: true, Status: 424, Code: serper.CodeUpstreamFailed, RequestID: "*"}, action: newKeyAct},
		{name: "503 service unavailable", faults: sandbox.Faults{Unavailable503: 1},
			want: serper.Result{Confirmed: true, Status: 503, Code: serper.CodeServiceUnavailable, RequestID: "*"}, action: newKeyAct},
		{name: "429 rate limited", faults: sandbox.Faults{RateLimited429: 1},
			want: serper.Result{Confirmed: true, Status: 429, Code: serper.CodeRateLimited, RequestID: "*", RetryAfter: 2 * time.Second}, action: waitNew},
		{name: "409 replay unavailable (early expiry)", prepare: sentOnce(sandbox.Faults{EarlyExpiry: 1}),
			want: serper.Result{Confirmed: true, Status: 409, Code: serper.CodeIdempotencyReplayUnavailable, RequestID: "original"}, action: reconcile},
		{name: "409 replay unavailable (past the window)", prepare: func(h *harness) string {
			key := sentOnce(sandbox.Faults{})(h)
			h.clock.Advance(15 * time.Minute)
			return key
		}, want: serper.Result{Confirmed: true, Status: 409, Code: serper.CodeIdempotencyReplayUnavailable, RequestID: "original"}, action: reconcile},
		{name: "401 unauthorized", token: "not-the-sandbox-token",
			want: serper.Result{Confirmed: true, Status: 401, Code: serper.CodeUnauthorized, RequestID: "*"}, action: fail},
		{name: "422 invalid request", body: []byte(`{"query":"x","device":"tv"}`),
			want: serper.Result{Confirmed: true, Status: 422, Code: serper.CodeInvalidRequest, RequestID: "*", Fields: []string{"device"}}, action: fail},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := setup(t, sandbox.Config{RetryAfter: 2 * time.Second, SlowSearchTime: time.Hour}, 300*time.Millisecond)
			if tt.token != "" {
				c, err := serper.New(serper.Config{BaseURL: h.url, Token: tt.token})
				require.NoError(t, err)
				h.client = c
				t.Cleanup(c.CloseIdleConnections)
			}
			key, original := newKey(), ""
			if tt.prepare != nil {
				key = tt.prepare(h)
				original = h.lastRequestID
			}
			b := tt.body
			if b == nil {
				b = espresso
			}
			h.sb.SetFaults(tt.faults)
			got := h.search(key, b)

			require.Equal(t, tt.want.Confirmed, got.Confirmed, "%+v", got)
			require.Equal(t, tt.want.Status, got.Status)
			require.Equal(t, tt.want.Code, got.Code)
			require.Equal(t, tt.want.Replayed, got.Replayed)
			require.Equal(t, tt.want.Unknown, got.Unknown, got.Detail)
			require.Equal(t, tt.want.Pages, got.Pages)
			require.Equal(t, tt.want.RetryAfter, got.RetryAfter)
			require.Equal(t, tt.want.Fields, got.Fields)
			if tt.rawCode != 0 {
				require.Equal(t, tt.rawCode, got.RawStatus)
			}
			switch tt.want.RequestID {
			case "":
				require.Empty(t, got.RequestID)
			case "*":
				require.Regexp(t, `^req_[0-9a-f]{24}$`, got.RequestID)
			case "original":
				require.Equal(t, original, got.RequestID)
			case "charged":
				entries := h.ledger(key)
				require.Len(t, entries, 1)
				require.Equal(t, entries[0].RequestID, got.RequestID)
			}
			if got.OK() {
				var s struct {
					RequestID string
					Organic   []json.RawMessage
				}
				require.NoError(t, json.Unmarshal(got.Search, &s))
				require.Equal(t, got.RequestID, s.RequestID)
				require.Len(t, s.Organic, got.Pages*10)
			} else {
				require.Nil(t, got.Search)
			}
			require.Equal(t, tt.action, nextAction(got))
		})
	}
}

// sentOnce sends espresso once under a new key with faults, remembers the
// request id it got, and returns the key.
func sentOnce(faults sandbox.Faults) func(h *harness) string {
	return func(h *harness) string {
		h.sb.SetFaults(faults)
		key := newKey()
		r := h.search(key, espresso)
		require.True(h.t, r.Confirmed, "%+v", r)
		h.lastRequestID = r.RequestID
		return key
	}
}

// running starts a search that runs until the sandbox closes and returns
// its key once the sandbox reports it running.
func running(h *harness) string {
	h.sb.SetFaults(sandbox.Faults{SlowSearch: 1})
	key := newKey()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan serper.Result, 1)
	go func() { done <- h.client.Search(ctx, key, espresso) }()
	h.t.Cleanup(func() {
		cancel()
		<-done
	})
	require.Eventually(h.t, func() bool { return h.sb.Stats().Running == 1 }, 10*time.Second, time.Millisecond)
	return key
}

func TestContractTransportOddities(t *testing.T) {
	h := setup(t, sandbox.Config{}, 0)
	res := h.search(newKey(), espresso)
	require.True(t, res.OK())
	require.Equal(t, http.StatusOK, res.RawStatus)
	require.Equal(t, serper.DefaultTimeout, h.client.Config().Timeout, "the production default works against the sandbox")
}
