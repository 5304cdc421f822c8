package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// startingEngine is "serpent run" started without waiting for it to be
// ready; cancel stops it with the given cause.
type startingEngine struct {
	stdout, stderr *syncBuffer
	done           chan error
	cancel         context.CancelCauseFunc
	httpAddr       string
}

func startEngineEarly(t *testing.T, args ...string) *startingEngine {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	r := &startingEngine{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1), cancel: cancel}
	go func() {
		r.done <- Run(ctx, append(testRunArgs(), args...), func(string) string { return "" }, r.stdout, r.stderr)
	}()
	t.Cleanup(func() {
		cancel(errors.New("test ended"))
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			t.Error("serpent run did not stop within 30 s")
		}
	})
	re := regexp.MustCompile(`status page on http://(\S+)/`)
	natstest.WaitFor(t, 20*time.Second, func() error {
		if m := re.FindStringSubmatch(r.stdout.String()); m != nil {
			r.httpAddr = m[1]
			return nil
		}
		return errors.New("no HTTP endpoint yet")
	})
	return r
}

// get answers a GET of path: its status code and body.
func (r *startingEngine) get(path string) (int, string, error) {
	resp, err := http.Get("http://" + r.httpAddr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// waitReadyz waits until /readyz answers code with a body holding want.
func (r *startingEngine) waitReadyz(t *testing.T, code int, want string) {
	t.Helper()
	natstest.WaitFor(t, 60*time.Second, func() error {
		got, body, err := r.get("/readyz")
		if err != nil {
			return err
		}
		if got != code || !strings.Contains(body, want) {
			return fmt.Errorf("/readyz answered %d %q, want %d with %q\nstderr:\n%s", got, body, code, want, r.stderr)
		}
		return nil
	})
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	return port
}

// TestRunWaitsForNATS starts serpent run before its NATS server. It keeps
// trying, says why on /readyz, logs each failed try in one line, gets
// ready once the server is up, and logs one line when it stops.
func TestRunWaitsForNATS(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	r := startEngineEarly(t, "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", port), "--http", "127.0.0.1:0")
	r.waitReadyz(t, http.StatusServiceUnavailable, "FAIL starting: connect to NATS: nats: connect to")
	code, body, err := r.get("/healthz")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code, body)
	natstest.WaitFor(t, 20*time.Second, func() error {
		if !strings.Contains(r.stderr.String(), "NATS not ready; trying again") {
			return errors.New("no failed try logged yet")
		}
		return nil
	})
	for _, line := range strings.Split(r.stderr.String(), "\n") {
		if strings.Contains(line, "trying again") {
			require.Contains(t, line, "step=\"connect to NATS\"")
			require.Contains(t, line, "try=")
		}
	}

	natstest.RunServer(t, func(c *snats.EmbeddedConfig) { c.Port = port })
	r.waitReadyz(t, http.StatusOK, "ok   stream SERP_EVENTS")
	require.Contains(t, r.stdout.String(), "ready with")

	r.cancel(errors.New("terminated signal received"))
	require.NoError(t, <-r.done)
	r.done <- nil
	require.Contains(t, r.stdout.String(), "serpent: stopping (terminated signal received); searches in flight have up to 15s (--grace) to finish\n")
}

// TestRunWaitsForJetStream connects serpent run to a server whose
// JetStream is not enabled yet: every stream lookup fails until it is.
func TestRunWaitsForJetStream(t *testing.T) {
	t.Parallel()
	srv, err := server.NewServer(&server.Options{ServerName: "late-js", Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go srv.Start()
	require.True(t, srv.ReadyForConnections(10*time.Second))
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })

	r := startEngineEarly(t, "--nats-url", srv.ClientURL(), "--http", "127.0.0.1:0")
	r.waitReadyz(t, http.StatusServiceUnavailable, "FAIL starting: open streams, buckets and consumers: nats: look up stream SERP_EVENTS: ")
	require.NotContains(t, r.stdout.String(), "ready with")

	require.NoError(t, srv.EnableJetStream(&server.JetStreamConfig{StoreDir: filepath.Join(t.TempDir(), "js")}))
	r.waitReadyz(t, http.StatusOK, "ok   stream SERP_EVENTS")
	require.Contains(t, r.stdout.String(), "ready with")
}

// TestRunGivesUpAfterConnectTimeout: with --connect-timeout, serpent run
// stops with an error once NATS has not come within it.
func TestRunGivesUpAfterConnectTimeout(t *testing.T) {
	t.Parallel()
	_, _, err := runCmd(t, "run", "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", freePort(t)), "--http", "",
		"--connect-timeout", "1s")
	require.ErrorContains(t, err, "connect to NATS: NATS not ready within --connect-timeout 1s: nats: connect to")
	require.Equal(t, 1, ExitCode(err))
}

// TestRunStopsWhileWaitingForNATS: a signal during the tries stops serpent
// run cleanly.
func TestRunStopsWhileWaitingForNATS(t *testing.T) {
	t.Parallel()
	r := startEngineEarly(t, "--nats-url", fmt.Sprintf("nats://127.0.0.1:%d", freePort(t)), "--http", "127.0.0.1:0")
	r.waitReadyz(t, http.StatusServiceUnavailable, "connect to NATS")
	r.cancel(errors.New("interrupt signal received"))
	require.NoError(t, <-r.done)
	r.done <- nil
	require.Contains(t, r.stdout.String(), "serpent: stopped before NATS was ready (interrupt signal received)\n")
}

// TestRunKeepsTheServerLogQuiet: the embedded server's banner shows only
// with --nats-log; serpent's own lines say where everything is.
func TestRunKeepsTheServerLogQuiet(t *testing.T) {
	t.Parallel()
	for _, verbose := range []bool{false, true} {
		args := []string{"--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--http", "127.0.0.1:0"}
		if verbose {
			args = append(args, "--nats-log")
		}
		r := startEngine(t, nil, args...)
		r.stop(t)
		require.Equal(t, verbose, strings.Contains(r.stderr.String(), "Starting nats-server"), r.stderr.String())
		for _, want := range []string{"SANDBOX MODE", "built-in sandbox at http://", "status page on http://", "JetStream at nats://", "ready with"} {
			require.Contains(t, r.stdout.String(), want)
		}
	}
}

// TestRunWaitsForAClusterQuorum starts serpent run on a 3-node cluster
// that has lost two nodes: its streams and buckets have no leader, and
// every lookup fails. It waits, and gets ready once the nodes are back.
func TestRunWaitsForAClusterQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	t.Parallel()
	c := natstest.RunCluster(t, 3)
	args := []string{"--nats-url", c.URL(), "--replicas", "3", "--http", "127.0.0.1:0", "--sweep-every", "0"}
	first := startEngineOn(t, nil, args...) // provisions the streams and buckets
	first.stop(t)

	c.Shutdown(c.Nodes[1])
	c.Shutdown(c.Nodes[2])
	r := startEngineEarly(t, args...)
	r.waitReadyz(t, http.StatusServiceUnavailable, "FAIL starting: open streams, buckets and consumers: ")
	require.NotContains(t, r.stdout.String(), "ready with")

	c.Restart(t, c.Nodes[1])
	c.Restart(t, c.Nodes[2])
	r.waitReadyz(t, http.StatusOK, "ok   stream SERP_EVENTS")
	require.Contains(t, r.stdout.String(), "ready with")
}
