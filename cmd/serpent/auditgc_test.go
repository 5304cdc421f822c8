package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuditGC: the audit's collector is lazy under a memory limit of at
// least 1 GiB, a GOMEMLIMIT of the environment is left in charge, and
// both settings come back as they were.
func TestAuditGC(t *testing.T) {
	percent, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
	debug.SetGCPercent(percent)
	t.Cleanup(func() { debug.SetGCPercent(percent); debug.SetMemoryLimit(limit) })

	restore := auditGC()
	require.Equal(t, auditGCPercent, debug.SetGCPercent(auditGCPercent))
	require.GreaterOrEqual(t, debug.SetMemoryLimit(-1), int64(auditHeapFloor))
	restore()
	require.Equal(t, percent, debug.SetGCPercent(percent))
	require.Equal(t, limit, debug.SetMemoryLimit(-1))

	t.Setenv("GOMEMLIMIT", "512MiB")
	restore = auditGC()
	require.Equal(t, limit, debug.SetMemoryLimit(-1), "the environment's limit is left as it is")
	restore()
	require.Equal(t, percent, debug.SetGCPercent(percent))
}
