package audit

import (
	"math"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// GCPercent is the GOGC an audit runs with (TuneGC).
const GCPercent = 400

// heapFloor is the memory the audit's lazy collector may always take
// (TuneGC).
const heapFloor = 1 << 30

// TuneGC makes the garbage collector lazy for an audit, and returns what
// undoes it (which may be called more than once). Reading a log moves a
// gigabyte of short-lived messages per million events through the
// client, and collecting less often (GOGC=400) saves a fifth of the
// audit's time. What the audit keeps grows with the jobs of the log,
// though (some 600 bytes a job), and on a log of millions of jobs a
// collector that waits until the heap is five times that would take tens
// of gigabytes. So a memory limit goes with it: 1 GiB, or twice the heap
// in use, whichever is more (kept up to date as the audit goes), beyond
// which the collector runs as it would with GOGC=100. A memory limit set
// already (GOMEMLIMIT in the environment, say) is left in charge.
func TuneGC() (restore func()) {
	percent := debug.SetGCPercent(GCPercent)
	limit := debug.SetMemoryLimit(-1)
	if limit != math.MaxInt64 {
		return sync.OnceFunc(func() { debug.SetGCPercent(percent) })
	}
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	follow := func() {
		metrics.Read(sample)
		var live int64
		if sample[0].Value.Kind() == metrics.KindUint64 {
			live = int64(sample[0].Value.Uint64())
		}
		debug.SetMemoryLimit(max(heapFloor, 2*live))
	}
	follow()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				follow()
			}
		}
	}()
	return sync.OnceFunc(func() {
		close(stop)
		<-done
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(percent)
	})
}
