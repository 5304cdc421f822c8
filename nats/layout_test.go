package nats_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// clientOutsideNATS are the packages outside the nats tree that may import
// the NATS client, and why.
var clientOutsideNATS = map[string]string{
	"internal/cli":   "it wires the program: connections, streams, the engine's adapters",
	"internal/bench": "it measures JetStream itself (its raw phase) and seeds servers of its own",
	"chaos":          "it drives real servers and processes, and reads their streams",
}

// TestOnlyTheNATSTreeImportsTheClient: every other package runs against
// interfaces, which fakes satisfy as well as the JetStream adapters.
func TestOnlyTheNATSTreeImportsTheClient(t *testing.T) {
	const module = "github.com/serpent-engine/serpent/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"...").Output()
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		if pkg == "nats" || strings.HasPrefix(pkg, "nats/") || clientOutsideNATS[pkg] != "" {
			continue
		}
		for _, imp := range fields[1:] {
			require.False(t, strings.HasPrefix(imp, "github.com/nats-io/"), "%s imports %s", pkg, imp)
		}
	}
}
