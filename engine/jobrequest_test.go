package engine_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/stretchr/testify/require"
)

// TestRepurchaseWithAMisspelledCountIsRefused: a re-purchase request
// whose "repurchases" count is misspelled ("repurchase") must get a clear
// 400, not be carried out as a request without a count: such a request is
// not safe to repeat, and its repeat (the answer was lost) buys a third
// time.
func TestRepurchaseWithAMisspelledCountIsRefused(t *testing.T) {
	e := setup(t, func(key string, n int) serper.Result {
		return confirmed(409, "idempotency_replay_unavailable", "req_"+key)
	})
	eng := e.engine("w1", engine.Hooks{})
	job := e.schedule(eng)
	key, _ := e.state(job).Current()
	e.api.charge(key.Key, "req_"+key.Key)
	require.Equal(t, aggregate.StatusChargedNoResult, e.runToEnd(eng, job).Status)

	srv := natstest.RunServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := eng.Service(ctx, srv.Conn)
	require.NoError(t, err)
	defer func() { _ = svc.Stop() }()

	req, _ := json.Marshal(map[string]any{"job_id": job, "by": "ops", "reason": "report", "repurchase": 0})
	for i := 0; i < 2; i++ { // the first answer is lost: the same request again
		msg, err := srv.Conn.Request(engine.ServicePrefix+".repurchase", req, 5*time.Second)
		require.NoError(t, err)
		if msg.Header.Get(micro.ErrorCodeHeader) == "400" {
			return // refused, as bad input should be
		}
		now, _ := e.state(job).Current()
		e.api.charge(now.Key, "req_"+now.Key) // lost again
		require.Equal(t, aggregate.StatusChargedNoResult, e.runToEnd(eng, job).Status)
	}
	t.Fatalf("a request with an unknown field was carried out twice: %d searches bought for one job", e.api.sendCount())
}

// TestJobRequestsTakeTheirOwnFields: each operation's request may have
// the fields its row of the README's table lists, and no other: a cancel
// with a re-purchase count, or a status request with an author, is a 400,
// and the job is left as it was.
func TestJobRequestsTakeTheirOwnFields(t *testing.T) {
	e := setup(t, func(string, int) serper.Result { return success("r", false) })
	eng := e.engine("w1", engine.Hooks{})
	job := e.schedule(eng)
	srv := natstest.RunServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc, err := eng.Service(ctx, srv.Conn)
	require.NoError(t, err)
	defer func() { _ = svc.Stop() }()

	ask := func(op string, req map[string]any) *natsgo.Msg {
		body, err := json.Marshal(req)
		require.NoError(t, err)
		msg, err := srv.Conn.Request(engine.ServicePrefix+"."+op, body, 5*time.Second)
		require.NoError(t, err)
		return msg
	}
	for op, req := range map[string]map[string]any{
		"cancel": {"job_id": job, "by": "ops", "reason": "r", "repurchases": 0},
		"status": {"job_id": job, "by": "ops"},
	} {
		msg := ask(op, req)
		require.Equal(t, "400", msg.Header.Get(micro.ErrorCodeHeader), "%s %v: %s", op, req, msg.Data)
	}
	require.NotEqual(t, aggregate.StatusCancelled, e.state(job).Status)
	for op, req := range map[string]map[string]any{
		"status": {"job_id": job},
		"cancel": {"job_id": job, "by": "ops", "reason": "r"},
	} {
		msg := ask(op, req)
		require.Empty(t, msg.Header.Get(micro.ErrorCodeHeader), "%s %v: %s", op, req, msg.Data)
	}
	require.Equal(t, aggregate.StatusCancelled, e.state(job).Status)
}
