package deploy_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/consume"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*msgBlock).flushLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	)
}

// passwords are the test's values of the variables accounts.conf reads.
var passwords = map[string]string{
	"SERPENT_ENGINE_PASSWORD": "engine-pw", "SERPENT_UPSTREAM_PASSWORD": "upstream-pw",
	"SERPENT_AUDITOR_PASSWORD": "auditor-pw", "SERPENT_SYS_PASSWORD": "sys-pw",
}

// loadNode reads nats/<name>.conf as nats-server does, checks it says
// what the deployment promises, and changes only what a test must: the
// client and route ports (and the routes' hosts) and the data folder.
func loadNode(t *testing.T, name string, clientPort int, routePorts map[string]int) *server.Options {
	t.Helper()
	o, err := server.ProcessConfigFile(filepath.Join("nats", name+".conf"))
	require.NoError(t, err)
	require.Equal(t, name, o.ServerName)
	require.True(t, o.JetStream, "JetStream is on")
	require.True(t, o.SyncAlways, "sync_interval: always")
	require.Equal(t, "serpent", o.Cluster.Name)
	require.Len(t, o.Routes, 3)
	require.NotEmpty(t, o.SystemAccount)

	o.Host, o.Port, o.HTTPPort = "127.0.0.1", clientPort, 0
	o.Cluster.Host, o.Cluster.Port = "127.0.0.1", routePorts[name]
	for i, r := range o.Routes {
		node := r.Hostname()
		require.Contains(t, routePorts, node, "route %s names a node of the cluster", r)
		o.Routes[i] = &url.URL{Scheme: r.Scheme, Host: fmt.Sprintf("127.0.0.1:%d", routePorts[node])}
	}
	o.StoreDir = t.TempDir()
	o.NoLog, o.NoSigs = os.Getenv("NATSTEST_LOG") == "", true
	return o
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		require.NoError(t, l.Close())
	}
	return ports
}

// startCluster starts n1, n2 and n3 from their config files and returns
// the client URLs.
func startCluster(t *testing.T) string {
	t.Helper()
	for k, v := range passwords {
		t.Setenv(k, v)
	}
	ports := freePorts(t, 6)
	routes := map[string]int{"n1": ports[3], "n2": ports[4], "n3": ports[5]}
	var urls []string
	var servers []*server.Server
	for i, name := range []string{"n1", "n2", "n3"} {
		o := loadNode(t, name, ports[i], routes)
		s, err := server.NewServer(o)
		require.NoError(t, err)
		if !o.NoLog {
			s.ConfigureLogger()
		}
		go s.Start()
		servers = append(servers, s)
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	}
	for _, s := range servers {
		require.True(t, s.ReadyForConnections(20*time.Second))
	}
	natstest.WaitFor(t, 30*time.Second, func() error { return natstest.MetaReady(servers) })
	return strings.Join(urls, ",")
}

// connect connects to the cluster as one of accounts.conf's users.
func connect(t *testing.T, urls, user string) (*natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsgo.Connect(urls, natsgo.UserInfo(user, passwords["SERPENT_"+strings.ToUpper(user)+"_PASSWORD"]))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return nc, js
}

// TestComposeClusterRunsJobs: the deployment's three NATS nodes, loaded
// from deploy/nats/n1.conf..n3.conf with their accounts and permissions,
// form a JetStream cluster; two engines, each connected as the engine
// user, provision R3 streams and run the jobs an upstream publisher
// orders, each bought once.
func TestComposeClusterRunsJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	urls := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, js := connect(t, urls, "engine")
	// Each try within its own time: on a loaded machine a request to the
	// cluster's meta leader can go unanswered, and another gets through.
	natstest.WaitFor(t, time.Minute, func() error {
		tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		_, err := snats.EnsureEventStream(tctx, js, snats.EventStreamOptions{Replicas: 3})
		return err
	})
	natstest.WaitFor(t, time.Minute, func() error {
		tctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		return snats.EnsureEngineStreams(tctx, js, snats.StreamOptions{Replicas: 3}, 5*time.Second)
	})
	for _, name := range []string{snats.EventStream, snats.CommandStream, snats.RejectStream, snats.WorkStream} {
		s, err := js.Stream(ctx, name)
		require.NoError(t, err)
		require.Equal(t, 3, s.CachedInfo().Config.Replicas, "stream %s", name)
	}

	sb := sandbox.New(sandbox.Config{Seed: 9, SearchTime: 2 * time.Millisecond, Faults: sandbox.Faults{DropAfterSearch: 0.1, Timeout408: 0.1}})
	sbURL, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	for i := range 2 {
		_, ejs := connect(t, urls, "engine")
		runEngine(t, ejs, sbURL, fmt.Sprintf("engine%d", i+1))
	}

	_, ujs := connect(t, urls, "upstream")
	const n = 40
	var jobs []string
	// A slot of now: a fixed one would pass the engines' retention horizon
	// one day.
	slot := time.Now().UTC().Truncate(time.Minute).Format(time.RFC3339)
	for i := range n {
		payload := fmt.Sprintf(`{"slot":"%s","query":"compose %d","country":"US","language":"en","device":"mobile"}`, slot, i)
		_, err := ujs.Publish(ctx, snats.ScheduleSubject, []byte(payload))
		require.NoError(t, err)
		c, err := engine.ParseCommand([]byte(payload))
		require.NoError(t, err)
		s, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "")
		require.NoError(t, err)
		jobs = append(jobs, s.JobID)
	}
	st, err := snats.NewEventStore(ctx, js, snats.EventStoreOptions{})
	require.NoError(t, err)
	natstest.WaitFor(t, 2*time.Minute, func() error {
		for _, j := range jobs {
			evs, _, err := st.Load(ctx, j)
			if err != nil {
				return err
			}
			if s := aggregate.Fold(evs); !s.Status.Terminal() {
				return fmt.Errorf("job %s is %q", j, s.Status)
			}
		}
		return nil
	})
	perKey := sb.Stats().ChargesPerKey
	for _, j := range jobs {
		evs, _, err := st.Load(ctx, j)
		require.NoError(t, err)
		require.Empty(t, aggregate.Verify(evs), "job %s", j)
		charges := 0
		for _, a := range aggregate.Fold(evs).Attempts {
			charges += perKey[a.Key]
		}
		require.LessOrEqual(t, charges, 1, "job %s was charged %d times", j, charges)
	}
}

// runEngine runs intake and workers on js until the test ends, as serpent
// run does.
func runEngine(t *testing.T, js jetstream.JetStream, sandboxURL, name string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := snats.NewEventStore(ctx, js, snats.EventStoreOptions{})
	require.NoError(t, err)
	client, err := serper.New(serper.Config{BaseURL: sandboxURL, Token: sandbox.DefaultToken, Timeout: 2 * time.Second, AllowShortTimeout: true})
	require.NoError(t, err)
	p := aggregate.DefaultPolicy()
	p.BaseDelay, p.MaxDelay, p.MinDelay = events.Duration(20*time.Millisecond), events.Duration(200*time.Millisecond), events.Duration(10*time.Millisecond)
	p.Lease = events.Duration(3 * time.Second)
	eng, err := engine.New(engine.Config{Name: name, Store: st, API: client, Timers: snats.NewTimers(js, nil), Policy: p,
		ReconcileRetry: 200 * time.Millisecond, RetryDelay: 100 * time.Millisecond})
	require.NoError(t, err)
	intake, err := snats.Consumer(ctx, js, snats.CommandStream, snats.IntakeConsumer)
	require.NoError(t, err)
	work, err := snats.Consumer(ctx, js, snats.WorkStream, snats.WorkConsumer)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_ = consume.Intake(ctx, eng, consume.NewRejections(js), intake, consume.Options{Concurrency: 16})
	}()
	go func() {
		defer wg.Done()
		_ = consume.Work(ctx, eng, work, consume.Options{Concurrency: 16, Grace: 5 * time.Second})
	}()
	t.Cleanup(func() { cancel(); wg.Wait(); client.CloseIdleConnections() })
}
