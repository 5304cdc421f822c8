package natstest

import (
	"context"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/nats"
)

// Server is a running single JetStream server and a connection to it.
type Server struct {
	*nats.Embedded
	// URL is the client URL; it stays the same across Restart.
	URL string
	// Conn and JS are connected to the server; Conn reconnects after a
	// Restart.
	Conn *natsgo.Conn
	JS   jetstream.JetStream

	cfg nats.EmbeddedConfig
}

// RunServer starts a JetStream server on a random loopback port with its
// data in t.TempDir() and fsync on every write, and connects to it. edit,
// if given, changes the configuration first. Everything is stopped when
// the test ends.
func RunServer(t testing.TB, edit ...func(*nats.EmbeddedConfig)) *Server {
	t.Helper()
	cfg := nats.EmbeddedConfig{Dir: t.TempDir(), Port: -1, ServerName: "serpent-test"}
	for _, e := range edit {
		e(&cfg)
	}
	e, err := nats.StartEmbedded(cfg)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	s := &Server{Embedded: e, URL: e.ClientURL(), cfg: cfg}
	s.cfg.Port = e.Port() // a restart comes back where clients look
	t.Cleanup(s.Shutdown)
	s.Conn, s.JS = Connect(t, s.URL)
	return s
}

// Restart stops the server and starts it again on the same port and data,
// then waits until JetStream answers again. edit, if given, changes the
// configuration first (it is kept for later restarts).
func (s *Server) Restart(t testing.TB, edit ...func(*nats.EmbeddedConfig)) {
	t.Helper()
	s.Embedded.Shutdown()
	for _, e := range edit {
		e(&s.cfg)
	}
	e, err := nats.StartEmbedded(s.cfg)
	if err != nil {
		t.Fatalf("natstest: restart: %v", err)
	}
	s.Embedded = e
	WaitFor(t, 10*time.Second, func() error {
		_, err := s.JS.AccountInfo(context.Background())
		return err
	})
}

// Shutdown closes the connection and stops the server; safe twice.
func (s *Server) Shutdown() {
	if s.Conn != nil {
		s.Conn.Close()
	}
	s.Embedded.Shutdown()
}

// Connect connects to url (a comma-separated list is fine) with a client
// that reconnects quickly and forever; the connection is closed when the
// test ends.
func Connect(t testing.TB, url string) (*natsgo.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := natsgo.Connect(url, natsgo.MaxReconnects(-1), natsgo.ReconnectWait(50*time.Millisecond),
		natsgo.Name("natstest"), natsgo.SyncQueueLen(nats.SyncQueueLen))
	if err != nil {
		t.Fatalf("natstest: connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	return nc, js
}
