package bench

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A test binary is not serpent: the scale phase does not run it as the
// engine unless told which binary to run.
func TestBenchEngineBinary(t *testing.T) {
	bin, why := engineBinary(func(string) string { return "" })
	require.Empty(t, bin)
	require.True(t, strings.Contains(why, "SERPENT_BENCH_ENGINE_BIN"), why)
	bin, _ = engineBinary(func(k string) string { return map[string]string{"SERPENT_BENCH_ENGINE_BIN": "/opt/serpent"}[k] })
	require.Equal(t, "/opt/serpent", bin)
}
