package service

import (
	"testing"

	"github.com/serpent-engine/serpent/nats/natstest"
)

// Every goroutine a test starts ends with it (nats-server's own leftovers
// aside: natstest.ServerLeftovers).
func TestMain(m *testing.M) { natstest.VerifyTestMain(m) }
