package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/consume"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper/sandbox"
	"github.com/stretchr/testify/require"
)

// syncBuffer is an io.Writer tests can read while the program writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// engineRun is "serpent run" running in the test.
type engineRun struct {
	stdout, stderr *syncBuffer
	done           chan error
	cancel         context.CancelFunc
	natsURL        string
	sandboxURL     string
}

// testRunArgs begin a test's serpent run: with no retention, so the
// tests' fixed slots (2026-12-02) stay accepted whatever the date. A
// test's own --retention comes later and wins.
func testRunArgs() []string { return []string{"run", "--retention", "0"} }

func startEngine(t *testing.T, env map[string]string, args ...string) *engineRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &engineRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1), cancel: cancel}
	go func() {
		r.done <- Run(ctx, append(testRunArgs(), args...), func(k string) string { return env[k] }, r.stdout, r.stderr)
	}()
	// Stopped however the test ends, even if it never got ready.
	t.Cleanup(func() { r.stop(t) })
	natsRE := regexp.MustCompile(`JetStream at (nats://\S+)`)
	sbRE := regexp.MustCompile(`built-in sandbox at (http://\S+)`)
	natstest.WaitFor(t, 20*time.Second, func() error {
		select {
		case err := <-r.done:
			r.done <- nil // stopped already: nothing for the cleanup to wait for
			t.Fatalf("serpent run ended early: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
		default:
		}
		out := r.stdout.String()
		if m := natsRE.FindStringSubmatch(out); m != nil {
			r.natsURL = m[1]
		}
		if m := sbRE.FindStringSubmatch(out); m != nil {
			r.sandboxURL = m[1]
		}
		if r.natsURL == "" || !bytes.Contains([]byte(out), []byte("ready with")) {
			return fmt.Errorf("not ready yet:\n%s", out)
		}
		return nil
	})
	return r
}

func (r *engineRun) stop(t *testing.T) {
	r.cancel()
	select {
	case err := <-r.done:
		require.NoError(t, err)
		r.done <- nil
	case <-time.After(30 * time.Second):
		t.Fatal("serpent run did not stop within 30 s")
	}
}

// TestRunEndToEnd drives "serpent run" with its embedded NATS and built-in
// sandbox under a fault mix: 500 jobs, some commands published twice, some
// malformed. Every job finishes, none is bought twice, every command is a
// job or a recorded rejection.
func TestRunEndToEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sbCfg := filepath.Join(dir, "sandbox.json")
	require.NoError(t, os.WriteFile(sbCfg, []byte(`{"seed":7,"searchTime":"2ms","retryAfter":"1s","faults":{
		"dropBeforeSearch":0.04,"dropAfterSearch":0.08,"gatewayPage502":0.04,"gatewayPage504":0.04,
		"timeout408":0.04,"failed424":0.02,"unavailable503":0.02,"billingUnavailable503":0.04,
		"earlyExpiry":0.04,"zeroResults":0.04,"rateLimited429":0.02}}`), 0o644))
	r := startEngine(t, nil, "--data", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0", "--http", "",
		"--sandbox-config", sbCfg, "--base-delay", "20ms", "--max-delay", "300ms", "--workers", "32", "--log-level", "warn",
		"--client-timeout", "2s", "--lease", "12s") // a reconciliation waits out the lease of the last send
	require.NotEmpty(t, r.sandboxURL)
	_, js := natstest.Connect(t, r.natsURL)
	ctx := context.Background()

	const jobs = 250
	var want []string
	publish := func(payload string) {
		_, err := js.Publish(ctx, snats.ScheduleSubject, []byte(payload))
		require.NoError(t, err)
	}
	for i := 0; i < jobs; i++ {
		p := fmt.Sprintf(`{"slot":"2026-12-02T14:%02d:00Z","query":"espresso scale %d","country":"US","language":"en","device":"mobile"}`, i%60, i)
		publish(p)
		if i%25 == 0 {
			publish(p)
		}
		c, err := engine.ParseCommand([]byte(p))
		require.NoError(t, err)
		s, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "")
		require.NoError(t, err)
		want = append(want, s.JobID)
	}
	bad := map[string]string{
		`{"slot":"tomorrow","query":"q","country":"US","language":"en","device":"mobile"}`:                         "invalid_slot",
		`{"slot":"2026-12-02T14:00:00Z","query":"q","country":"USA","language":"en","device":"mobile"}`:            "invalid_country",
		`{"slot":"2026-12-02T14:00:00Z","query":"q","country":"US","language":"en","device":"tablet"}`:             "invalid_device",
		`{"slot":"2026-12-02T14:00:00Z","query":"q","country":"US","language":"en","device":"mobile","limit":500}`: "invalid_limit",
		`{"slot":"2026-12-02T14:00:00Z","query":"","country":"US","language":"en","device":"mobile"}`:              "invalid_query",
		`{"slot":"2026-12-02T14:00:00Z","query":"q","colour":"red"}`:                                               "malformed",
		`<xml/>`: "malformed",
	}
	for p := range bad {
		publish(p)
	}

	st, err := snats.NewEventStore(ctx, js, snats.EventStoreOptions{})
	require.NoError(t, err)
	states := map[string]aggregate.State{}
	natstest.WaitFor(t, 3*time.Minute, func() error {
		for _, j := range want {
			if _, ok := states[j]; ok {
				continue
			}
			evs, _, err := st.Load(ctx, j)
			if err != nil {
				return err
			}
			s := aggregate.Fold(evs)
			if !s.Status.Terminal() {
				return fmt.Errorf("%d of %d jobs finished; %s is %q", len(states), jobs, j, s.Status)
			}
			require.Empty(t, aggregate.Verify(evs), "job %s", j)
			states[j] = s
		}
		return nil
	})

	// Nothing was bought twice, by the sandbox's own ledger.
	var stats sandbox.Stats
	req, _ := http.NewRequest("GET", r.sandboxURL+"/v1/sandbox/stats", nil)
	req.Header.Set("Authorization", "Bearer "+sandbox.DefaultToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&stats))
	resp.Body.Close()
	byStatus := map[aggregate.Status]int{}
	for j, s := range states {
		byStatus[s.Status]++
		charges := 0
		for _, a := range s.Attempts {
			charges += stats.ChargesPerKey[a.Key]
		}
		require.LessOrEqual(t, charges, 1, "job %s was bought %d times", j, charges)
		if s.Status == aggregate.StatusSucceeded && s.Result.Pages > 0 {
			require.Equal(t, 1, charges, "job %s succeeded with results but was not charged", j)
		}
	}
	require.Zero(t, stats.BodyViolations)
	require.Greater(t, byStatus[aggregate.StatusSucceeded], jobs*8/10, "most jobs succeed: %v", byStatus)
	t.Logf("final states %v; sandbox faults %v", byStatus, stats.Faults)

	// Every command is a job or a recorded rejection.
	cmds, err := js.Stream(ctx, snats.CommandStream)
	require.NoError(t, err)
	info, err := cmds.Info(ctx)
	require.NoError(t, err)
	require.EqualValues(t, jobs+jobs/25+len(bad), info.State.Msgs)
	rejected := map[uint64]string{}
	natstest.WaitFor(t, 10*time.Second, func() error {
		rej, err := js.Stream(ctx, snats.RejectStream)
		if err != nil {
			return err
		}
		for seq := uint64(1); ; seq++ {
			m, err := rej.GetMsg(ctx, seq)
			if err != nil {
				break
			}
			cs, _ := strconv.ParseUint(m.Header.Get(snats.HeaderCommandSeq), 10, 64)
			rejected[cs] = m.Header.Get(snats.HeaderRejectReason)
			require.Equal(t, bad[string(m.Data)], m.Header.Get(snats.HeaderRejectReason), "payload kept byte for byte, with its reason")
		}
		if len(rejected) != len(bad) {
			return fmt.Errorf("%d rejections recorded", len(rejected))
		}
		return nil
	})
	for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
		if _, ok := rejected[seq]; ok {
			continue
		}
		m, err := cmds.GetMsg(ctx, seq)
		require.NoError(t, err)
		c, err := engine.ParseCommand(m.Data)
		require.NoError(t, err)
		s, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "")
		require.NoError(t, err, "command %d was neither rejected nor valid", seq)
		require.Contains(t, states, s.JobID, "command %d has no job", seq)
	}
	_ = jetstream.ErrMsgNotFound
}

// TestRunStopsWhenALoopEnds: a loop whose consumer is deleted under it
// stops serpent run with an error naming it, rather than leaving a
// process that answers ready and does no work.
func TestRunStopsWhenALoopEnds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	done, ended := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(ended)
		done <- Run(ctx, append(testRunArgs(), "--data", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0", "--http", "",
			"--log-level", "error"), func(string) string { return "" }, stdout, stderr)
	}()
	t.Cleanup(func() { cancel(); <-ended })
	natsRE := regexp.MustCompile(`JetStream at (nats://\S+)`)
	var url string
	natstest.WaitFor(t, 20*time.Second, func() error {
		if m := natsRE.FindStringSubmatch(stdout.String()); m != nil && bytes.Contains([]byte(stdout.String()), []byte("ready with")) {
			url = m[1]
			return nil
		}
		return fmt.Errorf("not ready yet")
	})
	_, js := natstest.Connect(t, url)
	require.NoError(t, js.DeleteConsumer(context.Background(), snats.WorkStream, snats.WorkConsumer))
	select {
	case err := <-done:
		require.ErrorContains(t, err, "the work loop ended")
		require.ErrorIs(t, err, consume.ErrConsumerGone)
	case <-time.After(30 * time.Second):
		t.Fatal("serpent run went on without its work loop")
	}
}
