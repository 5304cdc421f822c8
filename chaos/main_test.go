package chaos_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/serpent-engine/serpent/chaos"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// TestMain checks for leaked goroutines, nats-server's own leftovers aside
// (natstest.ServerLeftovers), and removes
// the serpent binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(natstest.ServerLeftovers...); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// serpentBinary builds the serpent binary once for the package's tests.
func serpentBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "serpent-chaos-bin-"); binErr != nil {
			return
		}
		binPath, binErr = chaos.Binary(context.Background(), "", binDir)
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	if _, err := os.Stat(filepath.Clean(binPath)); err != nil {
		t.Fatal(err)
	}
	return binPath
}
