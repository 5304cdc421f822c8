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

	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/service"
)

// TestFirstSlot: an engine run with --first-slot refuses an earlier slot,
// 400 from the micro service and before_first_slot on SERP_REJECTED, and
// runs the first slot itself; the audit counts the refusal as the
// engine's configuration, not a violation. A --first-slot that is not a
// time is a usage error.
func TestFirstSlot(t *testing.T) {
	t.Parallel()
	var stdout, stderr strings.Builder
	err := Run(context.Background(), []string{"run", "--data", t.TempDir(), "--first-slot", "tomorrow"},
		func(string) string { return "" }, &stdout, &stderr)
	require.ErrorIs(t, err, errUsage)
	require.ErrorContains(t, err, "not an RFC 3339 time")

	first := time.Now().UTC().Truncate(time.Second)
	r := startEngine(t, nil, "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "", "--log-level", "error",
		"--first-slot", first.Format(time.RFC3339))
	nc, js := natstest.Connect(t, r.natsURL)
	command := func(slot time.Time) string {
		return fmt.Sprintf(`{"slot":%q,"query":"cutover","country":"US","language":"en","device":"mobile"}`, slot.Format(time.RFC3339))
	}
	early := command(first.Add(-time.Hour))

	msg, err := nc.Request(service.Prefix+".schedule", []byte(early), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "400", msg.Header.Get(micro.ErrorCodeHeader))
	var serr service.ErrorBody
	require.NoError(t, json.Unmarshal(msg.Data, &serr))
	require.Equal(t, engine.ReasonBeforeFirstSlot, serr.Reason)

	ctx := context.Background()
	_, err = js.Publish(ctx, snats.ScheduleSubject, []byte(early))
	require.NoError(t, err)
	natstest.WaitFor(t, 20*time.Second, func() error {
		rej, err := js.Stream(ctx, snats.RejectStream)
		if err != nil {
			return err
		}
		m, err := rej.GetLastMsgForSubject(ctx, snats.RejectSubjectPrefix+engine.ReasonBeforeFirstSlot)
		if err != nil {
			return err
		}
		require.Equal(t, early, string(m.Data))
		return nil
	})

	_, err = js.Publish(ctx, snats.ScheduleSubject, []byte(command(first)))
	require.NoError(t, err)
	job := jobOf(t, command(first))
	waitAllTerminal(t, js, []string{job})

	out, err := cli(t, r.natsURL, "audit", "-o", "json", "--progress=false")
	require.NoError(t, err, out)
	var rep audit.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Empty(t, rep.Violations)
	require.Equal(t, 1, rep.Jobs)
}
