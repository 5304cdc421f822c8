package cli

import (
	"bufio"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats/natstest"
)

// natsServerRun is "serpent nats-server" running in the test.
type natsServerRun struct {
	url  string
	stop func() error
}

func startNATSServer(t *testing.T, args ...string) *natsServerRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Run(ctx, append([]string{"nats-server"}, args...), func(string) string { return "" }, outW, io.Discard)
		_ = outW.Close()
		done <- err
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	var url string
	select {
	case url = <-lines:
	case err := <-done:
		cancel()
		t.Fatalf("serpent nats-server ended early: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("serpent nats-server printed no URL in 30 s")
	}
	r := &natsServerRun{url: strings.TrimSpace(url)}
	var stopped bool
	var stopErr error
	r.stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			stopErr = <-done
		}
		return stopErr
	}
	t.Cleanup(func() { _ = r.stop() })
	return r
}

// TestNATSServerKeepsDataAcrossRestarts: serpent nats-server serves
// JetStream, prints its URL, stops on its context, and a restart on the
// same folder finds what was acknowledged.
func TestNATSServerKeepsDataAcrossRestarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nats")
	first := startNATSServer(t, "--data", dir, "--listen", "127.0.0.1:0")
	require.True(t, strings.HasPrefix(first.url, "nats://127.0.0.1:"), first.url)
	_, js := natstest.Connect(t, first.url)
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstreamConfig("KEEP", "keep.>"))
	require.NoError(t, err)
	_, err = js.Publish(ctx, "keep.one", []byte("acknowledged"))
	require.NoError(t, err)
	require.NoError(t, first.stop())

	second := startNATSServer(t, "--data", dir, "--listen", "127.0.0.1:0")
	_, js = natstest.Connect(t, second.url)
	s, err := js.Stream(ctx, "KEEP")
	require.NoError(t, err)
	m, err := s.GetLastMsgForSubject(ctx, "keep.one")
	require.NoError(t, err)
	require.Equal(t, "acknowledged", string(m.Data))
}

func TestNATSServerUsage(t *testing.T) {
	for _, args := range [][]string{
		{"nats-server", "--listen", "no-port"},
		{"nats-server", "--listen", "127.0.0.1:70000"},
		{"nats-server", "extra"},
		{"nats-server", "--log-level", "loud"},
	} {
		_, _, err := runCmd(t, args...)
		require.Error(t, err, args)
		require.Equal(t, 2, ExitCode(err), "%v: %v", args, err)
	}
	_, usage, err := runCmd(t, "nats-server", "-h")
	require.NoError(t, err)
	require.Contains(t, usage, "fsync on every write")
}

func jetstreamConfig(name, subject string) jetstream.StreamConfig {
	return jetstream.StreamConfig{Name: name, Subjects: []string{subject}, Storage: jetstream.FileStorage}
}
