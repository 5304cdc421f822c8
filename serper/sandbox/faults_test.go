package sandbox_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

// TestEachFault checks what every fault does to the first request of a fresh
// key, and that a clean resend of the key never executes it twice.
func TestEachFault(t *testing.T) {
	tests := []struct {
		fault     sandbox.Faults
		kind      sandbox.FaultKind
		status    int    // 0: the connection is dropped
		code      string // envelope code, "" for 200 and HTML
		html      bool
		executed  bool
		charges   int
		resend    int // status of a clean resend of the same key
		replayed  bool
		violation bool
	}{
		{fault: sandbox.Faults{DropBeforeSearch: 1}, kind: sandbox.FaultDropBeforeSearch, resend: 200},
		{fault: sandbox.Faults{GatewayPage502: 1}, kind: sandbox.FaultGatewayPage502, status: 502, html: true, resend: 200},
		{fault: sandbox.Faults{RateLimited429: 1}, kind: sandbox.FaultRateLimited429, status: 429, code: "rate_limited", resend: 200},
		{fault: sandbox.Faults{Timeout408: 1}, kind: sandbox.FaultTimeout408, status: 408, code: "search_timeout", executed: true, resend: 408, replayed: true},
		{fault: sandbox.Faults{Failed424: 1}, kind: sandbox.FaultFailed424, status: 424, code: "upstream_failed", executed: true, resend: 424, replayed: true},
		{fault: sandbox.Faults{Unavailable503: 1}, kind: sandbox.FaultUnavailable503, status: 503, code: "service_unavailable", executed: true, resend: 503, replayed: true},
		{fault: sandbox.Faults{ZeroResults: 1}, kind: sandbox.FaultZeroResults, status: 200, executed: true, resend: 200, replayed: true},
		{fault: sandbox.Faults{BillingUnavailable503: 1}, kind: sandbox.FaultBillingUnavailable503, status: 503, code: "billing_unavailable", executed: true, charges: 1, resend: 200, replayed: true},
		{fault: sandbox.Faults{BillingLate: 1}, kind: sandbox.FaultBillingLate, status: 503, code: "billing_unavailable", executed: true, charges: 0, resend: 503},
		{fault: sandbox.Faults{DropAfterSearch: 1}, kind: sandbox.FaultDropAfterSearch, executed: true, charges: 1, resend: 200, replayed: true},
		{fault: sandbox.Faults{GatewayPage504: 1}, kind: sandbox.FaultGatewayPage504, status: 504, html: true, executed: true, charges: 1, resend: 200, replayed: true},
		{fault: sandbox.Faults{EarlyExpiry: 1}, kind: sandbox.FaultEarlyExpiry, status: 200, executed: true, charges: 1, resend: 409},
		{fault: sandbox.Faults{SlowSearch: 1}, kind: sandbox.FaultSlowSearch, status: 200, executed: true, charges: 1, resend: 200, replayed: true},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind), func(t *testing.T) {
			e := setup(t, sandbox.Config{SlowSearchTime: time.Millisecond, RetryAfter: 1500 * time.Millisecond})
			e.srv.SetFaults(tt.fault)
			key := uuid.NewString()
			r := e.search(key, espresso)
			if tt.status == 0 {
				require.Error(t, r.err, "the connection is dropped")
			} else {
				require.NoError(t, r.err)
				require.Equal(t, tt.status, r.status, "%s", r.body)
			}
			switch {
			case tt.html:
				require.Contains(t, r.header.Get("Content-Type"), "text/html")
				require.Contains(t, string(r.body), "<html>")
			case tt.code != "":
				require.Equal(t, tt.code, r.errorField(t, "code"))
			}
			if tt.kind == sandbox.FaultRateLimited429 {
				require.Equal(t, "2", r.header.Get("Retry-After"), "whole seconds, rounded up")
			}
			if tt.kind == sandbox.FaultZeroResults {
				require.Equal(t, []any{}, r.json(t)["organic"])
				require.Equal(t, float64(0), r.json(t)["pages"])
			}
			st := e.srv.Stats()
			require.Equal(t, 1, st.Faults[tt.kind], "%v", st.Faults)
			require.Equal(t, tt.executed, st.Executions == 1)

			e.srv.SetFaults(sandbox.Faults{})
			again := e.search(key, espresso)
			require.NoError(t, again.err)
			require.Equal(t, tt.resend, again.status, "%s", again.body)
			require.Equal(t, tt.replayed, again.header.Get("Idempotent-Replayed") == "true")
			st = e.srv.Stats()
			require.Equal(t, 1, st.Executions, "never a second execution of a key")
			if tt.executed {
				require.Equal(t, tt.charges, st.Charges)
			} else {
				require.Equal(t, 1, st.Charges, "the first execution was the resend")
			}
		})
	}
}

func TestTransportFaultsHitKnownKeysWithoutRunningThem(t *testing.T) {
	e := setup(t, sandbox.Config{})
	key := uuid.NewString()
	require.Equal(t, http.StatusOK, e.search(key, espresso).status)
	e.srv.SetFaults(sandbox.Faults{DropBeforeSearch: 1})
	require.Error(t, e.search(key, espresso).err)
	e.srv.SetFaults(sandbox.Faults{GatewayPage502: 1, RateLimited429: 1})
	require.Equal(t, http.StatusBadGateway, e.search(key, espresso).status)
	e.srv.SetFaults(sandbox.Faults{RateLimited429: 1})
	r := e.search(key, espresso)
	require.Equal(t, http.StatusOK, r.status, "known keys are never rate limited")
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	st := e.srv.Stats()
	require.Equal(t, 1, st.Executions)
	require.Equal(t, 1, st.Charges)
}

// TestSeedReproducesFaults runs the same requests, in the same order, on two
// sandboxes with one seed: same outcomes. Another seed gives another sequence.
func TestSeedReproducesFaults(t *testing.T) {
	faults := sandbox.Faults{DropBeforeSearch: 0.1, GatewayPage502: 0.1, RateLimited429: 0.1, Timeout408: 0.1,
		Failed424: 0.1, Unavailable503: 0.1, ZeroResults: 0.1, BillingUnavailable503: 0.1, DropAfterSearch: 0.1,
		GatewayPage504: 0.1, EarlyExpiry: 0.1}
	run := func(seed int64) []string {
		e := setup(t, sandbox.Config{Seed: seed, Faults: faults})
		var got []string
		for i := range 40 {
			r := e.search(fmt.Sprintf("00000000-0000-4000-8000-%012d", i), espresso)
			if r.err != nil {
				got = append(got, "dropped")
				continue
			}
			got = append(got, fmt.Sprintf("%d %s", r.status, r.header.Get("X-Request-Id")))
		}
		return got
	}
	a, b, c := run(7), run(7), run(8)
	require.Equal(t, a, b)
	require.NotEqual(t, a, c)
}

// TestBillingLateDrawsApart: BillingLate draws from a source of its own, so
// switching it on changes no other fault of a seeded run: the same requests
// meet the same faults, except that charged searches it hits answer 503
// billing_unavailable (with the same request id) instead of their 200.
func TestBillingLateDrawsApart(t *testing.T) {
	faults := sandbox.Faults{DropBeforeSearch: 0.1, GatewayPage502: 0.1, RateLimited429: 0.1, Timeout408: 0.1,
		Failed424: 0.1, Unavailable503: 0.1, ZeroResults: 0.1, EarlyExpiry: 0.1}
	run := func(late float64) []string {
		f := faults
		f.BillingLate = late
		e := setup(t, sandbox.Config{Seed: 7, Faults: f})
		var got []string
		for i := range 60 {
			r := e.search(fmt.Sprintf("00000000-0000-4000-8000-%012d", i), espresso)
			if r.err != nil {
				got = append(got, "dropped")
				continue
			}
			got = append(got, fmt.Sprintf("%d %s", r.status, r.header.Get("X-Request-Id")))
		}
		return got
	}
	off, on := run(0), run(0.5)
	var changed, kept int
	for i := range off {
		if off[i] == on[i] {
			kept++
			continue
		}
		changed++
		id, ok := strings.CutPrefix(off[i], "200 ")
		require.True(t, ok, "request %d: %q became %q", i, off[i], on[i])
		require.Equal(t, "503 "+id, on[i], "request %d", i)
	}
	require.NotZero(t, changed)
	require.NotZero(t, kept)
}

// TestFrontDoor: every front-door error comes before the key is looked
// up, also for a key that already bought: nothing runs, nothing is
// replayed, and the key's first response is still there afterwards.
func TestFrontDoor(t *testing.T) {
	e := setup(t, sandbox.Config{RetryAfter: time.Second})
	key := uuid.NewString()
	first := e.search(key, espresso)
	require.NoError(t, first.err)
	require.Equal(t, http.StatusOK, first.status)

	e.srv.SetFaults(sandbox.Faults{FrontDoor: 1})
	seen := map[int]bool{}
	for i := 0; i < 40; i++ {
		r := e.search(key, espresso)
		require.NoError(t, r.err)
		seen[r.status] = true
		require.Empty(t, r.header.Get("Idempotent-Replayed"), "a front-door error is not a replay")
		require.NotEmpty(t, r.errorField(t, "requestId"), "it is the API's own answer")
		if r.status == http.StatusTooManyRequests {
			require.Equal(t, "1", r.header.Get("Retry-After"))
		}
	}
	require.Equal(t, map[int]bool{408: true, 424: true, 429: true, 503: true}, seen)
	st := e.srv.Stats()
	require.Equal(t, 1, st.Executions, "nothing ran again")
	require.Equal(t, 1, st.Charges)
	require.Equal(t, 40, st.Faults[sandbox.FaultFrontDoor])

	e.srv.SetFaults(sandbox.Faults{})
	again := e.search(key, espresso)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
}

// TestLostRecord: a resend of a billed key whose record the API lost runs
// the search again and bills it again, without the replay header.
func TestLostRecord(t *testing.T) {
	e := setup(t, sandbox.Config{})
	key := uuid.NewString()
	first := e.search(key, espresso)
	require.Equal(t, http.StatusOK, first.status)

	e.srv.SetFaults(sandbox.Faults{LostRecord: 1})
	again := e.search(key, espresso)
	require.NoError(t, again.err)
	require.Equal(t, http.StatusOK, again.status)
	require.Empty(t, again.header.Get("Idempotent-Replayed"))
	require.NotEqual(t, first.json(t)["requestId"], again.json(t)["requestId"], "a second execution")

	st := e.srv.Stats()
	require.Equal(t, 2, st.Executions)
	require.Equal(t, 2, st.ChargesPerKey[key], "billed twice under one key")
	require.Equal(t, 1, st.Faults[sandbox.FaultLostRecord])
	require.Len(t, e.ledger("idempotencyKey="+key), 2)

	// An unbilled key has nothing to lose: a zero-result search replays.
	zero := uuid.NewString()
	e.srv.SetFaults(sandbox.Faults{})
	require.Equal(t, http.StatusOK, e.search(zero, `{"query":"`+sandbox.ZeroResultsPrefix+` x"}`).status)
	e.srv.SetFaults(sandbox.Faults{LostRecord: 1})
	r := e.search(zero, `{"query":"`+sandbox.ZeroResultsPrefix+` x"}`)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
}
