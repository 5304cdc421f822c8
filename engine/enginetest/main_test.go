package enginetest_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts (a watch's) ends with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
