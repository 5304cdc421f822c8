package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	snats "github.com/serpent-engine/serpent/nats"
)

func init() {
	register(command{name: "nats-server", summary: "run the embedded NATS server with JetStream alone (fsync on every write)", run: runNATSServer})
}

// runNATSServer is "serpent nats-server": the JetStream server serpent run
// embeds, as a process of its own, for chaos runs (which restart it) and for
// anyone who wants a local server without installing nats-server.
func runNATSServer(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nats-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "serpent-nats", "folder of the JetStream data")
	listen := fs.String("listen", "127.0.0.1:4222", "client address (port 0: any free port)")
	name := fs.String("name", "serpent", "server name (each node of a cluster needs its own)")
	syncEvery := fs.Duration("sync-interval", 0, "how often JetStream fsyncs; 0 means after every write, which a ledger of paid searches needs")
	allowRemote := fs.Bool("allow-non-loopback", false, "listen on an address other machines can reach (the server has no authentication)")
	cluster := fs.String("cluster", "", "cluster name: make this server a node of a cluster")
	clusterListen := fs.String("cluster-listen", "127.0.0.1:6222", "route address of this node (with --cluster)")
	routes := fs.String("routes", "", "comma-separated route URLs of the other nodes, nats-route://host:port (with --cluster)")
	var lf logFlags
	fs.StringVar(&lf.format, "log-format", "text", "log format: text or json")
	fs.StringVar(&lf.level, "log-level", "warn", "log level of the server's own log: debug, info, warn or error")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: serpent nats-server [flags]

Runs the NATS server with JetStream that serpent run embeds, on its own: data
in --data, fsync on every write unless --sync-interval says otherwise,
loopback only unless allowed. It prints its client URL on stdout once it
accepts connections, and stops on SIGINT or SIGTERM. Point serpent run (and
the nats CLI) at it with --nats-url. Flags:

`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: nats-server: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: nats-server takes no arguments, got %q", errUsage, fs.Args())
	}
	log, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	host, port, err := splitListen(*listen)
	if err != nil {
		return fmt.Errorf("%w: --listen: %v", errUsage, err)
	}
	cfg := snats.EmbeddedConfig{Dir: *data, Host: host, Port: port, ServerName: *name, SyncInterval: *syncEvery,
		AllowNonLoopback: *allowRemote, Logger: log}
	if *cluster != "" {
		chost, cport, err := splitListen(*clusterListen)
		if err != nil {
			return fmt.Errorf("%w: --cluster-listen: %v", errUsage, err)
		}
		cfg.Cluster = &snats.ClusterConfig{Name: *cluster, Host: chost, Port: cport}
		for _, r := range strings.Split(*routes, ",") {
			if r = strings.TrimSpace(r); r != "" {
				cfg.Cluster.Routes = append(cfg.Cluster.Routes, r)
			}
		}
	}
	srv, err := snats.StartEmbedded(cfg)
	if err != nil {
		return fmt.Errorf("nats-server: %w", err)
	}
	defer srv.Shutdown()
	fsync := "fsync on every write"
	if *syncEvery > 0 {
		fsync = "fsync every " + syncEvery.String() + " (acknowledged writes can be lost on power loss)"
	}
	fmt.Fprintf(stderr, "serpent: NATS server %s with JetStream, data in %s, %s\n", srv.Name(), *data, fsync)
	if _, err := fmt.Fprintln(stdout, srv.ClientURL()); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// splitListen reads host:port; port 0 means any free port.
func splitListen(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port %q", p)
	}
	if port == 0 {
		port = -1 // the embedded server's "any free port"
	}
	return host, port, nil
}
