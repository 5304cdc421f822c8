package cli

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/service"
)

// TestRepurchaseAsksAgainOnlyWhereSafe: serpent repurchase repeats a
// request whose answer does not come only to an engine that honours the
// request's count (its status says so); an engine of an earlier version
// ignores the count, so a repeat could buy again: the request goes once.
// A stale count says nothing was authorised.
func TestRepurchaseAsksAgainOnlyWhereSafe(t *testing.T) {
	t.Parallel()
	const job = "0123456789abcdef0123456789abcdef"
	for name, tc := range map[string]struct {
		honours bool
		asked   func(int64) bool
	}{
		"an engine that honours the count": {true, func(n int64) bool { return n >= 2 }},
		"an earlier engine":                {false, func(n int64) bool { return n == 1 }},
	} {
		t.Run(name, func(t *testing.T) {
			srv := natstest.RunServer(t)
			nc, _ := natstest.Connect(t, srv.URL)
			_, err := nc.Subscribe(service.Prefix+".status", func(m *natsgo.Msg) {
				reply := natsgo.NewMsg(m.Reply)
				reply.Data, _ = json.Marshal(map[string]any{"job_id": job, "status": "charged_no_result", "repurchases": 1})
				if tc.honours {
					reply.Header.Set(service.HeaderRepurchaseCount, "1")
				}
				_ = m.RespondMsg(reply)
			})
			require.NoError(t, err)
			var asked atomic.Int64
			_, err = nc.Subscribe(service.Prefix+".repurchase", func(m *natsgo.Msg) {
				asked.Add(1) // and the answer is lost
				var req engine.JobRequest
				require.NoError(t, json.Unmarshal(m.Data, &req))
				require.NotNil(t, req.Repurchases)
				require.Equal(t, 1, *req.Repurchases, "the count the status showed")
			})
			require.NoError(t, err)
			require.NoError(t, nc.Flush())

			_, err = cli(t, srv.URL, "repurchase", job, "--reason", "r", "--timeout", "2500ms")
			require.ErrorContains(t, err, "--repurchases 1")
			require.True(t, tc.asked(asked.Load()), "asked %d times", asked.Load())
		})
	}
}
