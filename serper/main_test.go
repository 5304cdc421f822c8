package serper

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind: not the client's
// connections, not the sandbox's searches.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
