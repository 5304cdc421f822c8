package natstest

import (
	"testing"

	"go.uber.org/goleak"
)

// ServerLeftovers are the goroutines a stopped nats-server may leave
// running for a while: a file store's flush loops (and the access-time
// ticker they hold), which a node shut down in the middle of a write
// keeps a moment longer, and a sourced stream's wait for its source
// consumer (SERP_ARCHIVE's), which ends only at its own timeout. They are
// the server's, not serpent's; any other goroutine still fails a leak
// check.
var ServerLeftovers = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*msgBlock).flushLoop"),
	goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
	goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
	goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*stream).trySetupSourceConsumer.func3"),
}

// VerifyTestMain runs a package's tests and fails the run if any leaves a
// goroutine behind, the server's leftovers aside. Call it from TestMain.
func VerifyTestMain(m *testing.M) { goleak.VerifyTestMain(m, ServerLeftovers...) }
