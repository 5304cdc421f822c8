package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/audit"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/service"
)

// TestAuditAcrossExpiry: with a horizon of seconds, jobs leave the live
// log, and the engine restarts while they do. The audit over the archive
// (and the live log) reaches the same verdict before, during and after
// their expiry, the ledger join included, and serpent status answers for
// a job that left, saying it is archived.
func TestAuditAcrossExpiry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"--data", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0", "--http", "", "--log-level", "warn",
		"--max-age", "1s", "--skew-margin", "1s", "--retention", "15s", "--base-delay", "20ms", "--max-delay", "200ms"}
	r := startEngine(t, nil, args...)
	_, js := natstest.Connect(t, r.natsURL)
	ctx := context.Background()
	var early, late []string
	var first string // the command of early[0]
	for i := range 20 {
		slot := time.Now().Add(time.Second)
		if i%2 == 1 {
			slot = slot.Add(3 * time.Second) // leaves the live log 3 s after the others
		}
		p := fmt.Sprintf(`{"slot":%q,"query":"retention %d","country":"US","language":"en","device":"mobile"}`, slot.UTC().Format(time.RFC3339), i)
		_, err := js.Publish(ctx, snats.ScheduleSubject, []byte(p))
		require.NoError(t, err)
		if i%2 == 1 {
			late = append(late, jobOf(t, p))
		} else {
			early = append(early, jobOf(t, p))
		}
		if i == 0 {
			first = p
		}
	}
	waitAllTerminal(t, js, append(append([]string(nil), early...), late...))

	verdict := func(url string, args ...string) audit.Report {
		t.Helper()
		out, err := cli(t, url, append([]string{"audit", "-o", "json", "--progress=false"}, args...)...)
		require.NoError(t, err, out)
		var rep audit.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		require.Empty(t, rep.Violations)
		rep.Now, rep.Commands = time.Time{}, nil // the commands leave SERP_COMMANDS by its max age
		return rep
	}
	before := verdict(r.natsURL, "--ledger", r.sandboxURL)
	require.Equal(t, 20, before.Jobs)
	require.Equal(t, 20, before.Purchases)
	require.NotNil(t, before.Ledger)

	st, err := snats.NewEventStore(ctx, js, snats.EventStoreOptions{})
	require.NoError(t, err)
	left := func(jobs []string) func() error {
		return func() error {
			for _, j := range jobs {
				if evs, _, err := st.Load(ctx, j); err != nil || len(evs) > 0 {
					return fmt.Errorf("job %s is still live (%v)", j, err)
				}
			}
			return nil
		}
	}
	natstest.WaitFor(t, time.Minute, left(early))
	require.Equal(t, before, verdict(r.natsURL, "--ledger", r.sandboxURL), "some jobs archived, the others live")

	// A restart while the other jobs leave: the server removes them when
	// their time comes, stopped or not.
	r.stop(t)
	r = startEngine(t, nil, args...)
	_, js = natstest.Connect(t, r.natsURL)
	live, err := js.Stream(ctx, snats.EventStream)
	require.NoError(t, err)
	natstest.WaitFor(t, time.Minute, func() error {
		info, err := live.Info(ctx)
		if err == nil && info.State.Msgs > 0 {
			err = fmt.Errorf("the live log holds %d messages", info.State.Msgs)
		}
		return err
	})
	after := verdict(r.natsURL)
	after.Ledger, before.Ledger = nil, nil // the new engine's sandbox has a ledger of its own
	require.Equal(t, before, after, "every job archived")

	// Its slot is past the horizon: the micro service refuses it, 400.
	nc, _ := natstest.Connect(t, r.natsURL)
	msg, err := nc.Request(service.Prefix+".schedule", []byte(first), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "400", msg.Header.Get(micro.ErrorCodeHeader))
	require.Contains(t, string(msg.Data), "slot_expired")

	out, err := cli(t, r.natsURL, "status", early[0])
	require.NoError(t, err)
	require.Contains(t, out, "archived")
	require.Contains(t, out, "succeeded")
	out, err = cli(t, r.natsURL, "status", early[0], "-o", "json")
	require.NoError(t, err)
	require.True(t, strings.Contains(out, `"archived": true`) || strings.Contains(out, `"archived":true`), out)
}
