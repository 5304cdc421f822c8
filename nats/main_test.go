package nats_test

import (
	"testing"

	"go.uber.org/goleak"
)

// nats-server can leave a file store's flush loops (and the access-time
// ticker they hold) running for a while after a node is shut down in the
// middle of a write, which the cluster tests do on purpose. They belong to
// the server, not to serpent; any goroutine of serpent's own still fails
// the run.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*msgBlock).flushLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	)
}
