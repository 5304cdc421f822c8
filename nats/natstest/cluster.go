package natstest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/nats"
)

// Cluster is an n-node in-process JetStream cluster.
type Cluster struct {
	Nodes []*Node
}

// Node is one server of a Cluster. Embedded is nil while it is shut down.
type Node struct {
	*nats.Embedded
	Name string
	URL  string
	cfg  nats.EmbeddedConfig
}

// RunCluster starts an n-node JetStream cluster on loopback ports, every
// node with its data in t.TempDir() and fsync on every write, and waits
// until JetStream has a meta leader and every node is current. Nodes are
// stopped when the test ends.
func RunCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	ports := freePorts(t, 2*n)
	var routes []string
	for i := range n {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[n+i]))
	}
	c := &Cluster{}
	for i := range n {
		name := fmt.Sprintf("n%d", i+1)
		cfg := nats.EmbeddedConfig{
			Dir: t.TempDir(), Port: ports[i], ServerName: name,
			Cluster: &nats.ClusterConfig{Name: "serpent-test", Port: ports[n+i], Routes: routes},
		}
		if os.Getenv("NATSTEST_LOG") != "" {
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("node", name)
		}
		c.Nodes = append(c.Nodes, &Node{Name: name, URL: fmt.Sprintf("nats://127.0.0.1:%d", ports[i]), cfg: cfg})
	}
	t.Cleanup(func() {
		for _, node := range c.Nodes {
			if node.Embedded != nil {
				node.Embedded.Shutdown()
			}
		}
	})
	for _, node := range c.Nodes {
		c.Restart(t, node)
	}
	c.WaitReady(t)
	return c
}

// WaitReady waits until the running nodes have a JetStream meta leader and
// are all current, for example after a Restart.
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	WaitFor(t, 30*time.Second, c.ready)
}

// WaitStreamCurrent waits until the stream has a leader and every replica
// is current: the stream can lose any one node again.
func (c *Cluster) WaitStreamCurrent(t testing.TB, js jetstream.JetStream, stream string) {
	t.Helper()
	WaitFor(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		cl := s.CachedInfo().Cluster
		if cl == nil || cl.Leader == "" {
			return fmt.Errorf("stream %s has no leader", stream)
		}
		for _, r := range cl.Replicas {
			if !r.Current || r.Offline {
				return fmt.Errorf("stream %s: replica %s is not current", stream, r.Name)
			}
		}
		return nil
	})
}

// ready reports whether the running nodes have a meta leader, are all
// current, and are seen online and current by the leader.
func (c *Cluster) ready() error {
	var running []*server.Server
	for _, node := range c.Nodes {
		if node.Embedded != nil {
			running = append(running, node.Server())
		}
	}
	return MetaReady(running)
}

// MetaReady reports whether the given JetStream servers (the running
// nodes of one cluster) have a meta leader, are all current, and are seen
// online and current by the leader: until then a replicated stream can
// find "no suitable peers for placement", or its creation can wait on a
// meta group still settling.
func MetaReady(servers []*server.Server) error {
	var leader *server.Server
	for _, s := range servers {
		if !s.JetStreamIsCurrent() {
			return fmt.Errorf("node %s is not current", s.Name())
		}
		if s.JetStreamIsLeader() {
			leader = s
		}
	}
	if leader == nil {
		return errors.New("no JetStream meta leader")
	}
	jsz, err := leader.Jsz(&server.JSzOptions{})
	if err != nil {
		return err
	}
	if jsz.Meta == nil {
		return errors.New("the meta leader reports no cluster")
	}
	online := 0
	for _, p := range jsz.Meta.Replicas {
		if p.Current && !p.Offline {
			online++
		}
	}
	if online < len(servers)-1 {
		return fmt.Errorf("the meta leader sees %d of %d other nodes online and current", online, len(servers)-1)
	}
	return nil
}

// URL lists every node's client URL, comma-separated, for a client that
// fails over between them.
func (c *Cluster) URL() string {
	urls := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		urls[i] = n.URL
	}
	return strings.Join(urls, ",")
}

// Connect connects to the whole cluster; see the package-level Connect.
func (c *Cluster) Connect(t testing.TB) (*natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	return Connect(t, c.URL())
}

// Node returns the node of that server name, nil if none.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// StreamLeader waits until the stream has a leader other than not (""
// for any) and returns it.
func (c *Cluster) StreamLeader(t testing.TB, js jetstream.JetStream, stream, not string) *Node {
	t.Helper()
	var leader *Node
	WaitFor(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info := s.CachedInfo()
		if info.Cluster == nil || info.Cluster.Leader == "" || info.Cluster.Leader == not {
			return fmt.Errorf("stream %s has no new leader yet", stream)
		}
		leader = c.Node(info.Cluster.Leader)
		if leader == nil || leader.Embedded == nil {
			return fmt.Errorf("stream %s names leader %s, which is not running", stream, info.Cluster.Leader)
		}
		return nil
	})
	return leader
}

// Shutdown stops a node and waits until it has stopped.
func (c *Cluster) Shutdown(n *Node) {
	if n.Embedded != nil {
		n.Embedded.Shutdown()
		n.Embedded = nil
	}
}

// Restart starts a stopped node again on its ports and data (or starts it
// for the first time).
func (c *Cluster) Restart(t testing.TB, n *Node) {
	t.Helper()
	c.Shutdown(n)
	e, err := nats.StartEmbedded(n.cfg)
	if err != nil {
		t.Fatalf("natstest: node %s: %v", n.Name, err)
	}
	n.Embedded = e
}

// freePorts finds n free loopback ports. Another process could take one
// before the server binds it; on a test machine that is rare enough.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	var ls []net.Listener
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: free port: %v", err)
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}
