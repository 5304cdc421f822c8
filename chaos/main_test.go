package chaos_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/serpent-engine/serpent/chaos"
)

// TestMain checks for leaked goroutines, with the same allowances as the
// nats package (a killed cluster node's file store flushers), and removes
// the serpent binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(
			goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*msgBlock).flushLoop"),
			goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
			goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
		); err != nil {
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
