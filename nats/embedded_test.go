package nats_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

func TestEmbeddedDefaults(t *testing.T) {
	e, err := nats.StartEmbedded(nats.EmbeddedConfig{Dir: t.TempDir(), Port: -1})
	require.NoError(t, err)
	defer e.Shutdown()
	require.True(t, e.Server().JetStreamEnabled())
	require.Contains(t, e.ClientURL(), "127.0.0.1")
	require.NotZero(t, e.Port())
	require.Empty(t, e.ClusterURL())
	require.Equal(t, "serpent", e.Name())
	e.Shutdown()
	e.Shutdown() // twice is fine
}

func TestEmbeddedSyncAlways(t *testing.T) {
	tests := []struct {
		name     string
		interval time.Duration
		always   bool
	}{
		{"default fsyncs every write", 0, true},
		{"an interval if asked", time.Minute, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := nats.StartEmbedded(nats.EmbeddedConfig{Dir: t.TempDir(), Port: -1, SyncInterval: tt.interval})
			require.NoError(t, err)
			defer e.Shutdown()
			o := e.Server().JetStreamConfig()
			require.Equal(t, tt.always, o.SyncAlways)
			if !tt.always {
				require.Equal(t, tt.interval, o.SyncInterval)
			}
		})
	}
}

func TestEmbeddedRefuses(t *testing.T) {
	tests := []struct {
		name string
		cfg  nats.EmbeddedConfig
		want []string
	}{
		{"no folder", nats.EmbeddedConfig{Port: -1}, []string{"data folder"}},
		{"open to the network", nats.EmbeddedConfig{Dir: "x", Host: "0.0.0.0", Port: -1}, []string{"0.0.0.0", "loopback"}},
		{"cluster without name", nats.EmbeddedConfig{Dir: "x", Port: -1, Cluster: &nats.ClusterConfig{Port: -1}}, []string{"cluster name"}},
		{"everything at once", nats.EmbeddedConfig{Host: "10.0.0.1", Cluster: &nats.ClusterConfig{Host: "10.0.0.2"}},
			[]string{"data folder", "10.0.0.1", "10.0.0.2", "cluster name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := nats.StartEmbedded(tt.cfg)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

// syncBuffer is a log destination for a server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestEmbeddedLogsToSlog(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	srv := natstest.RunServer(t, func(c *nats.EmbeddedConfig) { c.Logger = log })
	_, err := srv.JS.AccountInfo(context.Background())
	require.NoError(t, err)
	srv.Shutdown()
	require.Contains(t, buf.String(), "level=INFO")
	require.Contains(t, buf.String(), "component=nats-server")
	require.NotContains(t, buf.String(), "level=DEBUG")
}
