package sandbox_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

func TestReplayWithinWindow(t *testing.T) {
	e := setup(t, sandbox.Config{ReplayWindow: 10 * time.Minute})
	key := uuid.NewString()
	first := e.search(key, espresso)
	require.Equal(t, http.StatusOK, first.status)
	require.Empty(t, first.header.Get("Idempotent-Replayed"))

	e.clock.Advance(10*time.Minute - time.Second)
	again := e.search(key, espresso)
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, first.body, again.body, "a replay is the first response, byte for byte")
	require.Equal(t, first.header.Get("X-Request-Id"), again.header.Get("X-Request-Id"))

	st := e.srv.Stats()
	require.Equal(t, 1, st.Executions)
	require.Equal(t, 1, st.Replays)
	require.Equal(t, 1, st.Charges)
}

func TestPastWindow(t *testing.T) {
	const window = 15 * time.Minute
	tests := []struct {
		name   string
		body   string
		faults sandbox.Faults
		// what the first execution answered, and whether it was billed
		firstStatus int
		billed      bool
	}{
		{name: "billed key: replay unavailable", body: espresso, firstStatus: http.StatusOK, billed: true},
		{name: "zero results: forgotten", body: `{"query":"zero-results: nothing"}`, firstStatus: http.StatusOK},
		{name: "failed 408: forgotten", body: espresso, faults: sandbox.Faults{Timeout408: 1}, firstStatus: http.StatusRequestTimeout},
		{name: "failed 424: forgotten", body: espresso, faults: sandbox.Faults{Failed424: 1}, firstStatus: http.StatusFailedDependency},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, sandbox.Config{})
			e.srv.SetFaults(tt.faults)
			key := uuid.NewString()
			first := e.search(key, tt.body)
			require.Equal(t, tt.firstStatus, first.status, "%s", first.body)
			firstID := first.header.Get("X-Request-Id")
			e.srv.SetFaults(sandbox.Faults{})

			e.clock.Advance(window)
			late := e.search(key, tt.body)
			st := e.srv.Stats()
			if tt.billed {
				require.Equal(t, http.StatusConflict, late.status)
				require.Equal(t, "idempotency_replay_unavailable", late.errorField(t, "code"))
				require.Equal(t, firstID, late.errorField(t, "requestId"), "carries the original request id")
				require.Empty(t, late.header.Get("Idempotent-Replayed"))
				require.Equal(t, 1, st.Executions)
				require.Equal(t, 1, st.ReplayUnavailable)
				require.Len(t, e.ledger("requestId="+firstID), 1)
				return
			}
			require.Equal(t, http.StatusOK, late.status, "%s", late.body)
			require.Empty(t, late.header.Get("Idempotent-Replayed"), "a fresh search, not a replay")
			require.NotEqual(t, firstID, late.header.Get("X-Request-Id"))
			require.Equal(t, 2, st.Executions)
			require.Equal(t, 1, st.Forgotten)
		})
	}
}

func TestEarlyExpiry(t *testing.T) {
	e := setup(t, sandbox.Config{Faults: sandbox.Faults{EarlyExpiry: 1}})
	billed, free := uuid.NewString(), uuid.NewString()
	first := e.search(billed, espresso)
	require.Equal(t, http.StatusOK, first.status, "the reply in flight is still sent")
	require.Equal(t, http.StatusOK, e.search(free, `{"query":"zero-results: x"}`).status)
	e.srv.SetFaults(sandbox.Faults{})

	r := e.search(billed, espresso)
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "idempotency_replay_unavailable", r.errorField(t, "code"))
	require.Equal(t, first.header.Get("X-Request-Id"), r.errorField(t, "requestId"))

	r = e.search(free, `{"query":"zero-results: x"}`)
	require.Equal(t, http.StatusOK, r.status)
	require.Empty(t, r.header.Get("Idempotent-Replayed"), "an unbilled key is forgotten and runs again")
	st := e.srv.Stats()
	require.Equal(t, 2, st.Faults[sandbox.FaultEarlyExpiry])
	require.Equal(t, 3, st.Executions)
	require.Equal(t, 1, st.Charges)
}

func TestBodyViolation(t *testing.T) {
	e := setup(t, sandbox.Config{})
	key := uuid.NewString()
	first := e.search(key, espresso)
	other := e.search(key, `{"query":"a different search"}`)
	require.Equal(t, http.StatusOK, other.status)
	require.Equal(t, "true", other.header.Get("Idempotent-Replayed"))
	require.Equal(t, first.body, other.body, "a changed body under a known key gets the original response")
	st := e.srv.Stats()
	require.Equal(t, 1, st.BodyViolations)
	require.Equal(t, 1, st.Executions)
}

func TestInProgressAndDetachedSearch(t *testing.T) {
	e := setup(t, sandbox.Config{SearchTime: time.Hour})
	key := uuid.NewString()
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan reply, 1)
	go func() { first <- e.searchCtx(ctx, key, espresso) }()
	waitFor(t, "the search to start", func() bool { return e.srv.Stats().Running == 1 })

	r := e.search(key, espresso)
	require.Equal(t, http.StatusConflict, r.status)
	require.Equal(t, "idempotency_in_progress", r.errorField(t, "code"))
	cancel()
	require.Error(t, (<-first).err)

	st := e.srv.Stats()
	require.Equal(t, 1, st.Running, "the client hung up; the search goes on")
	require.Equal(t, 1, st.InProgress)
	require.Equal(t, 1, st.Executions)
	// Close (in cleanup) stops the hour-long search; goleak checks it did.
}

func TestHungUpClientStillBilled(t *testing.T) {
	// The search runs long enough for the test to see it running and hang
	// up (50 ms once lost that race on a loaded machine), short enough to
	// wait for it to end.
	e := setup(t, sandbox.Config{SlowSearchTime: 2 * time.Second, Faults: sandbox.Faults{SlowSearch: 1}})
	key := uuid.NewString()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan reply, 1)
	go func() { done <- e.searchCtx(ctx, key, espresso) }()
	waitFor(t, "the search to start", func() bool { return e.srv.Stats().Running == 1 })
	cancel()
	require.Error(t, (<-done).err)
	waitFor(t, "the search to finish", func() bool { return e.srv.Stats().Running == 0 })

	e.srv.SetFaults(sandbox.Faults{})
	r := e.search(key, espresso)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.Len(t, e.ledger("idempotencyKey="+key), 1)
}

func TestCloseDropsWaitingRequests(t *testing.T) {
	srv := sandbox.New(sandbox.Config{SearchTime: time.Hour})
	url, err := srv.Start("127.0.0.1:0")
	require.NoError(t, err)
	e := &env{t: t, srv: srv, url: url, token: sandbox.DefaultToken, http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	done := make(chan reply, 1)
	go func() { done <- e.search(uuid.NewString(), espresso) }()
	waitFor(t, "the search to start", func() bool { return srv.Stats().Running == 1 })
	require.NoError(t, srv.Close())
	require.Error(t, (<-done).err, "the waiting request gets no reply")
	_, err = srv.Start("127.0.0.1:0")
	require.Error(t, err, "a closed sandbox does not start again")
}
