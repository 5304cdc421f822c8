package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// EmbeddedConfig configures an in-process NATS server with JetStream.
type EmbeddedConfig struct {
	// Dir is the JetStream data folder. Required.
	Dir string
	// Host is the client listen address; default 127.0.0.1. The server
	// runs without authentication, so a host that is not a loopback
	// address is refused unless AllowNonLoopback is set.
	Host string
	// Port is the client port; 0 means 4222, -1 a random free port.
	Port int
	// AllowNonLoopback lets Host be an address other machines can reach.
	// Anyone who can connect then has full access.
	AllowNonLoopback bool
	// SyncInterval is how often JetStream fsyncs its files. 0, the
	// default, means after every write (sync_interval: always), which is
	// what a ledger of paid searches needs: NATS's own default (2 minutes)
	// loses acknowledged writes on power loss.
	SyncInterval time.Duration
	// ServerName names the server (in a cluster every node needs its own);
	// default "serpent".
	ServerName string
	// MaxPayload is the largest message; 0 means NATS's default, 1 MiB.
	MaxPayload int32
	// Domain is the JetStream domain, empty for none.
	Domain string
	// Cluster makes the server a node of a cluster; nil for a single
	// server.
	Cluster *ClusterConfig
	// Logger receives the server's log (notices at Info, warnings, errors;
	// debug and trace only if the logger is enabled for Debug). Nil keeps
	// the server quiet.
	Logger *slog.Logger
	// ReadyTimeout bounds start-up, which recovers every stream from
	// disk first; default 5 minutes (a log of five million jobs, 27 GB,
	// took 2 s here; a slow disk or a damaged index takes far longer).
	ReadyTimeout time.Duration
}

// DefaultReadyTimeout is how long an embedded server may take to start.
const DefaultReadyTimeout = 5 * time.Minute

// ClusterConfig makes an embedded server a cluster node.
type ClusterConfig struct {
	// Name of the cluster, the same on every node.
	Name string
	// Host and Port of the route listener; Host defaults to the client
	// Host, Port -1 picks a free one.
	Host string
	Port int
	// Routes are the other nodes' route URLs (nats-route://host:port).
	Routes []string
}

// Embedded is a running in-process NATS server.
type Embedded struct {
	srv  *server.Server
	once sync.Once
}

// ProfileLabel is the pprof label whose value names the part of a process
// a goroutine works for; the embedded server's goroutines carry
// ProfilePartServer, except those the server labels itself (with
// ProfileLabelServerOwn among others).
const (
	ProfileLabel      = "serpent.part"
	ProfilePartServer = "nats-server"
	// ProfileLabelServerOwn is a label nats-server gives the goroutines
	// of its streams and consumers, in place of any label they had.
	ProfileLabelServerOwn = "account"
)

// StartEmbedded starts a server and waits until it accepts connections.
func StartEmbedded(cfg EmbeddedConfig) (*Embedded, error) {
	opts, err := cfg.serverOptions()
	if err != nil {
		return nil, err
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("nats: embedded server: %w", err)
	}
	if cfg.Logger != nil {
		l := slogLogger{cfg.Logger}
		srv.SetLoggerV2(l, l.enabled(slog.LevelDebug), l.enabled(levelTrace), false)
	}
	go func() {
		// The server's goroutines carry a profiler label, so a CPU profile
		// of a process that embeds it tells its share from the rest. (Its
		// streams' and consumers' own goroutines replace it with labels
		// of theirs, "account" among them.)
		pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels(ProfileLabel, ProfilePartServer)))
		srv.Start()
	}()
	timeout := cfg.ReadyTimeout
	if timeout <= 0 {
		timeout = DefaultReadyTimeout
	}
	if !srv.ReadyForConnections(timeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("nats: embedded server on %s:%d not ready after %s", opts.Host, opts.Port, timeout)
	}
	return &Embedded{srv: srv}, nil
}

func (cfg EmbeddedConfig) serverOptions() (*server.Options, error) {
	var errs []error
	if cfg.Dir == "" {
		errs = append(errs, errors.New("data folder is missing"))
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		errs = append(errs, err)
	}
	host := cfg.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if !cfg.AllowNonLoopback && !isLoopback(host) {
		errs = append(errs, fmt.Errorf("host %q is not a loopback address and the embedded server has no authentication; listen on 127.0.0.1 or allow it explicitly", host))
	}
	port := cfg.Port
	if port == 0 {
		port = server.DEFAULT_PORT
	}
	name := cfg.ServerName
	if name == "" {
		name = "serpent"
	}
	opts := &server.Options{
		ServerName:      name,
		Host:            host,
		Port:            port,
		JetStream:       true,
		JetStreamDomain: cfg.Domain,
		StoreDir:        dir,
		MaxPayload:      cfg.MaxPayload,
		NoSigs:          true,
		NoLog:           cfg.Logger == nil,
	}
	if cfg.SyncInterval > 0 {
		opts.SyncInterval = cfg.SyncInterval
	} else {
		opts.SyncAlways = true
	}
	if c := cfg.Cluster; c != nil {
		chost := c.Host
		if chost == "" {
			chost = host
		}
		if !cfg.AllowNonLoopback && !isLoopback(chost) {
			errs = append(errs, fmt.Errorf("cluster host %q is not a loopback address; allow it explicitly", chost))
		}
		if c.Name == "" {
			errs = append(errs, errors.New("cluster name is missing"))
		}
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: chost, Port: c.Port}
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				errs = append(errs, fmt.Errorf("route %q: %w", r, err))
				continue
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("nats: embedded server: %w", err)
	}
	return opts, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ClientURL is the URL clients (and the nats CLI) connect to.
func (e *Embedded) ClientURL() string { return e.srv.ClientURL() }

// Port is the client port the server listens on.
func (e *Embedded) Port() int {
	if a, ok := e.srv.Addr().(*net.TCPAddr); ok {
		return a.Port
	}
	_, p, _ := net.SplitHostPort(e.srv.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}

// ClusterURL is the route URL other nodes use to reach this one, empty if
// it is not a cluster node.
func (e *Embedded) ClusterURL() string {
	a := e.srv.ClusterAddr()
	if a == nil {
		return ""
	}
	return "nats-route://" + a.String()
}

// Name is the server's name.
func (e *Embedded) Name() string { return e.srv.Name() }

// Server is the underlying nats-server, for what this type does not wrap.
func (e *Embedded) Server() *server.Server { return e.srv }

// Shutdown stops the server and waits until it has. It is safe to call
// more than once.
func (e *Embedded) Shutdown() {
	e.once.Do(func() {
		e.srv.Shutdown()
		e.srv.WaitForShutdown()
	})
}
