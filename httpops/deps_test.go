package httpops_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNoNATSClient: the ops server and the metrics read NATS only through
// what the engine gives them, so neither depends on the NATS client.
func TestNoNATSClient(t *testing.T) {
	for _, dir := range []string{".", "../metrics"} {
		out, err := exec.Command("go", "list", "-deps", dir).Output()
		require.NoError(t, err)
		for _, dep := range strings.Fields(string(out)) {
			require.False(t, strings.HasPrefix(dep, "github.com/nats-io/"), "%s depends on %s", dir, dep)
		}
	}
}
