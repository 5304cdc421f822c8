package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper"
)

// TestRepurchaseWithAMisspelledCountIsRefused: a re-purchase request
// whose "repurchases" count is misspelled ("repurchase") must be refused
// as a bad request, not be carried out as a request without a count: such
// a request is not safe to repeat, and its repeat (the answer was lost)
// buys a third time.
func TestRepurchaseWithAMisspelledCountIsRefused(t *testing.T) {
	e := setup(t, func(key string, n int) serper.Result {
		return confirmed(409, "idempotency_replay_unavailable", "req_"+key)
	})
	eng := e.engine("w1", engine.Hooks{})
	job := e.schedule(eng)
	key, _ := e.state(job).Current()
	e.api.charge(key.Key, "req_"+key.Key)
	require.Equal(t, aggregate.StatusChargedNoResult, e.runToEnd(eng, job).Status)

	req, _ := json.Marshal(map[string]any{"job_id": job, "by": "ops", "reason": "report", "repurchase": 0})
	_, err := eng.JobOp(context.Background(), "repurchase", req, "test")
	require.ErrorIs(t, err, engine.ErrBadRequest)
	require.Equal(t, aggregate.StatusChargedNoResult, e.state(job).Status, "nothing authorised")
}

// TestJobRequestsTakeTheirOwnFields: each operation's request may have
// the fields its row of the README's table lists, and no other: a cancel
// with a re-purchase count, or a status request with an author, is a bad
// request, and the job is left as it was.
func TestJobRequestsTakeTheirOwnFields(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return success("r", false) })
	eng := e.engine("w1", engine.Hooks{})
	job := e.schedule(eng)
	ctx := context.Background()
	for _, tc := range []struct {
		op  string
		req map[string]any
		bad bool
	}{
		{"cancel", map[string]any{"job_id": job, "by": "ops", "reason": "r", "repurchases": 0}, true},
		{"status", map[string]any{"job_id": job, "by": "ops"}, true},
		{"status", map[string]any{"job_id": job, "job_id ": job}, true},
		{"status", map[string]any{"job_id": job}, false},
		{"cancel", map[string]any{"job_id": job, "by": "ops", "reason": "r"}, false},
	} {
		body, err := json.Marshal(tc.req)
		require.NoError(t, err)
		_, err = eng.JobOp(ctx, tc.op, body, "test")
		if tc.bad {
			require.ErrorIs(t, err, engine.ErrBadRequest, "%s %v", tc.op, tc.req)
			require.NotEqual(t, aggregate.StatusCancelled, e.state(job).Status)
			continue
		}
		require.NoError(t, err, "%s %v", tc.op, tc.req)
	}
	require.Equal(t, aggregate.StatusCancelled, e.state(job).Status)
}

// TestJobOps: a status answers a job's state, by its id alone too; an
// operation on a job that does not exist, or without a job, or one the
// engine does not have, is an error the caller can tell apart.
func TestJobOps(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return success("r", false) })
	eng := e.engine("w1", engine.Hooks{})
	job := e.schedule(eng)
	ctx := context.Background()
	s, err := eng.JobOp(ctx, "status", []byte(" "+job+" "), "test")
	require.NoError(t, err)
	require.Equal(t, job, s.JobID)
	for _, tc := range []struct {
		op, payload string
		want        error
	}{
		{"status", "0123456789abcdef0123456789abcdef", aggregate.ErrNoJob},
		{"status", "hello", engine.ErrBadRequest},
		{"cancel", "job-that-is-not-there", engine.ErrBadRequest},
		{"status", "", engine.ErrBadRequest},
		{"status", `{"job_id":"not a job id"}`, engine.ErrBadRequest},
		{"frobnicate", job, engine.ErrBadRequest},
	} {
		_, err := eng.JobOp(ctx, tc.op, []byte(tc.payload), "test")
		require.ErrorIs(t, err, tc.want, "%s %q", tc.op, tc.payload)
	}
	s, err = eng.JobOp(ctx, "cancel", []byte(`{"job_id":"`+job+`"}`), "who-asks")
	require.NoError(t, err)
	require.Equal(t, aggregate.StatusCancelled, s.Status)
	evs := e.log(job)
	cancelled, ok := evs[len(evs)-1].Data.(events.JobCancelled)
	require.True(t, ok)
	require.Equal(t, "who-asks", cancelled.By, "the author when the request names none")
}
