package natstest

import (
	"testing"
	"time"
)

// WaitFor polls cond every 20 ms until it returns nil, and fails the test
// with its last error after timeout.
func WaitFor(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("natstest: still not so after %s: %v", timeout, err)
		}
		<-tick.C
	}
}
