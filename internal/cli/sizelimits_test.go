package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/service"
	"github.com/serpent-engine/serpent/projections"
)

// TestSizeLimits: a schedule command over engine.MaxCommandBytes is
// refused with a clear error (micro service) or recorded as too_large
// (stream); an API reply over --max-response-bytes is an unknown outcome
// (oversized_body) and the key is resent, never a new one; a limit that
// cannot work is a usage error naming the flag.
func TestSizeLimits(t *testing.T) {
	var stdout, stderr strings.Builder
	err := Run(context.Background(), []string{"run", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "", "--max-response-bytes", "100"},
		func(string) string { return "" }, &stdout, &stderr)
	require.ErrorIs(t, err, errUsage)
	require.ErrorContains(t, err, "--max-response-bytes 100 is under 1024")

	r := startEngine(t, nil, "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "", "--log-level", "error",
		"--max-response-bytes", "1024")
	nc, js := natstest.Connect(t, r.natsURL)
	big := fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":%q,"country":"US","language":"en","device":"mobile"}`, strings.Repeat("x", engine.MaxCommandBytes))

	msg, err := nc.Request(service.Prefix+".schedule", []byte(big), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "400", msg.Header.Get(micro.ErrorCodeHeader))
	var serr service.ErrorBody
	require.NoError(t, json.Unmarshal(msg.Data, &serr))
	require.Equal(t, engine.ReasonTooLarge, serr.Reason)
	require.Contains(t, serr.Error, fmt.Sprintf("the limit is %d", engine.MaxCommandBytes))

	_, err = js.Publish(context.Background(), snats.ScheduleSubject, []byte(big))
	require.NoError(t, err)
	natstest.WaitFor(t, 20*time.Second, func() error {
		rej, err := js.Stream(context.Background(), snats.RejectStream)
		if err != nil {
			return err
		}
		m, err := rej.GetLastMsgForSubject(context.Background(), snats.RejectSubjectPrefix+engine.ReasonTooLarge)
		if err != nil {
			return err
		}
		require.Equal(t, big, string(m.Data), "the refused command is kept byte for byte")
		require.Contains(t, m.Header.Get(snats.HeaderRejectError), "the limit is")
		return nil
	})

	job, err := cli(t, r.natsURL, "schedule", "--query", "espresso scale", "--device", "mobile", "--slot", "2026-12-02T14:00:00Z")
	require.NoError(t, err)
	job = strings.TrimSpace(job)
	natstest.WaitFor(t, 30*time.Second, func() error {
		out, err := cli(t, r.natsURL, "status", job, "-o", "json")
		if err != nil {
			return err
		}
		var v projections.JobView
		require.NoError(t, json.Unmarshal([]byte(out), &v))
		if v.LastOutcome == nil || v.Sends < 2 {
			return fmt.Errorf("job is %s after %d sends", v.Status, v.Sends)
		}
		require.Equal(t, "oversized_body", v.LastOutcome.Unknown)
		require.Len(t, v.Attempts, 1, "an oversized reply is unknown: the same key is resent")
		return nil
	})
}
