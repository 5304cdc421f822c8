package sim_test

import (
	"runtime/debug"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no world leaves a goroutine behind, and lets the
// heap grow more between collections: a world makes much short-lived
// garbage (encoded events, replies), and the default run is sized for a
// minute of CI.
func TestMain(m *testing.M) {
	debug.SetGCPercent(400)
	goleak.VerifyTestMain(m)
}
