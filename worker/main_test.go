package worker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts ends with it. nats-server can leave a file
// store's flush loops (and the access-time ticker they hold) running for a
// while after a server shuts down; they are the server's, not serpent's.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*msgBlock).flushLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	)
}
