package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/service"
	"github.com/serpent-engine/serpent/recurring"
	"github.com/stretchr/testify/require"
)

// TestSchedulesCommand: recurring schedules from the shell, and by command
// on serp.cmd.schedules.<op> as an upstream system would.
func TestSchedulesCommand(t *testing.T) {
	t.Parallel()
	r := startEngine(t, nil, "--data", filepath.Join(t.TempDir(), "data"), "--nats-listen", "127.0.0.1:0",
		"--http", "", "--log-level", "warn")
	_, js := natstest.Connect(t, r.natsURL)
	ctx := context.Background()

	_, err := cli(t, r.natsURL, "schedules", "create", "--id", "espresso", "--schedule", "@every 1s",
		"--query", "espresso scale", "--device", "mobile")
	require.NoError(t, err)
	_, err = cli(t, r.natsURL, "schedules", "create", "--id", "bad", "--schedule", "0 25 * * *", "--query", "q")
	require.ErrorContains(t, err, "hour field")
	_, err = cli(t, r.natsURL, "schedules", "create", "--id", "twin", "--schedule", "@hourly", "--query", "espresso scale", "--device", "mobile")
	require.ErrorContains(t, err, `same observations as schedule "espresso"`)
	_, err = cli(t, r.natsURL, "schedules", "create", "--id", "berlin", "--schedule", "@daily", "--time-zone", "Berlin/Mitte", "--query", "q")
	require.ErrorContains(t, err, "unknown time zone")
	// The same time for both ends is an empty window (it once lost --start
	// and became a schedule open until --end).
	_, err = cli(t, r.natsURL, "schedules", "create", "--id", "empty", "--schedule", "@daily", "--query", "q",
		"--start", "2027-03-01T00:00:00Z", "--end", "2027-03-01T00:00:00Z")
	require.ErrorContains(t, err, "end must be after start")

	out, err := cli(t, r.natsURL, "schedules", "list")
	require.NoError(t, err)
	require.Contains(t, out, "espresso")
	require.Contains(t, out, "active")

	// More schedules than one answer holds are listed page by page.
	sched, err := openSchedules(ctx, js, snats.NewTimers(js, nil), nil, nil)
	require.NoError(t, err)
	for i := range 130 {
		_, err := sched.Create(ctx, recurring.Definition{ID: fmt.Sprintf("yearly-%03d", i), Schedule: "0 0 1 1 *",
			Query: fmt.Sprintf("grinder %d", i), Country: "US", Language: "en", Device: "desktop",
			Start: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)})
		require.NoError(t, err)
	}
	out, err = cli(t, r.natsURL, "schedules", "list", "-o", "json")
	require.NoError(t, err)
	var all []engine.Record
	require.NoError(t, json.Unmarshal([]byte(out), &all))
	require.Len(t, all, 131)
	require.Equal(t, "espresso", all[0].Definition.ID)
	require.Equal(t, "yearly-129", all[130].Definition.ID)
	for _, id := range []string{"yearly-000", "yearly-099", "yearly-100"} {
		require.True(t, slices.ContainsFunc(all, func(r engine.Record) bool { return r.Definition.ID == id }), id)
	}
	nc, _ := natstest.Connect(t, r.natsURL)
	msg, err := nc.Request(service.Prefix+".schedules.list", []byte(`{"after":"yearly-127","limit":5}`), 5*time.Second)
	require.NoError(t, err)
	var page []engine.Record
	require.NoError(t, json.Unmarshal(msg.Data, &page))
	require.Len(t, page, 2)
	require.Equal(t, "yearly-128", page[0].Definition.ID)

	// It fires; show lists the slots' jobs and their states.
	natstest.WaitFor(t, 20*time.Second, func() error {
		out, err := cli(t, r.natsURL, "schedules", "show", "espresso", "-o", "json")
		if err != nil {
			return err
		}
		var v struct {
			Jobs []struct{ Status string } `json:"jobs"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			return err
		}
		if len(v.Jobs) < 2 || v.Jobs[0].Status != "succeeded" {
			return fmt.Errorf("jobs so far: %+v", v.Jobs)
		}
		return nil
	})
	out, err = cli(t, r.natsURL, "schedules", "show", "espresso")
	require.NoError(t, err)
	require.Contains(t, out, "succeeded")

	out, err = cli(t, r.natsURL, "schedules", "pause", "espresso")
	require.NoError(t, err)
	require.Contains(t, out, "paused")
	_, err = cli(t, r.natsURL, "schedules", "resume", "espresso")
	require.NoError(t, err)
	_, err = cli(t, r.natsURL, "schedules", "delete", "espresso")
	require.NoError(t, err)
	_, err = cli(t, r.natsURL, "schedules", "show", "espresso")
	require.ErrorContains(t, err, "no such schedule")

	// The same by command: a good one is carried out, a bad one recorded.
	_, err = js.Publish(ctx, "serp.cmd.schedules.create", []byte(`{"id":"grinder","schedule":"@daily","query":"grinder","country":"DE","language":"de","device":"desktop"}`))
	require.NoError(t, err)
	_, err = js.Publish(ctx, "serp.cmd.schedules.create", []byte(`{"id":"nope","schedule":"every day","query":"q","country":"DE","language":"de","device":"desktop"}`))
	require.NoError(t, err)
	natstest.WaitFor(t, 10*time.Second, func() error {
		out, err := cli(t, r.natsURL, "schedules", "list")
		if err != nil || !strings.Contains(out, "grinder") {
			return fmt.Errorf("not created yet: %v %s", err, out)
		}
		rej, err := js.Stream(ctx, snats.RejectStream)
		if err != nil {
			return err
		}
		m, err := rej.GetLastMsgForSubject(ctx, "serp.rejected.invalid_schedule")
		if err != nil {
			return err
		}
		require.Contains(t, m.Header.Get(snats.HeaderRejectError), "5 fields")
		require.Contains(t, string(m.Data), `"id":"nope"`)
		return nil
	})
}
