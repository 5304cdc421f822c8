package cli

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// runCmd runs the program as main would and returns what it printed.
func runCmd(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	env := func(string) string { return "" }
	err := Run(context.Background(), args, env, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

func TestHelpListsCommands(t *testing.T) {
	for _, args := range [][]string{nil, {"help"}, {"--help"}} {
		out, _, err := runCmd(t, args...)
		require.NoError(t, err)
		require.Contains(t, out, "Usage: serpent <command>")
		require.Contains(t, out, "version")
		require.Contains(t, out, "run")
	}
}

func TestVersion(t *testing.T) {
	out, _, err := runCmd(t, "version")
	require.NoError(t, err)
	require.Regexp(t, `^serpent \S+\n$`, out)
}

func TestUnknownCommandIsAUsageError(t *testing.T) {
	_, _, err := runCmd(t, "fly")
	require.ErrorIs(t, err, errUsage)
	require.Equal(t, 2, ExitCode(err))
	require.Contains(t, err.Error(), `"fly"`)
}
