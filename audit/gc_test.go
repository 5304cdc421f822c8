package audit

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuditGC: the audit's collector is lazy under a memory limit of at
// least 1 GiB, a limit set already (GOMEMLIMIT, say) is left in charge,
// and both settings come back as they were (restore may be called more
// than once).
func TestAuditGC(t *testing.T) {
	percent := debug.SetGCPercent(-1)
	debug.SetGCPercent(percent)
	limit := debug.SetMemoryLimit(math.MaxInt64) // none, whatever the environment says
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })

	restore := TuneGC()
	t.Cleanup(restore)
	require.Equal(t, GCPercent, debug.SetGCPercent(GCPercent))
	require.GreaterOrEqual(t, debug.SetMemoryLimit(-1), int64(heapFloor))
	restore()
	require.Equal(t, percent, debug.SetGCPercent(percent))
	require.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))

	debug.SetMemoryLimit(512 << 20)
	restore = TuneGC()
	t.Cleanup(restore)
	require.Equal(t, int64(512<<20), debug.SetMemoryLimit(-1), "a limit set already is left as it is")
	restore()
	require.Equal(t, percent, debug.SetGCPercent(percent))
}
