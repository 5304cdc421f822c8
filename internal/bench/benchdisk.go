package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// benchDiskSync is what one durable write costs the disk alone: a write
// of the raw phase's payload and an fsync, as the server does for every
// message published one at a time. With the round trip of a memory
// stream (benchRaw.MemorySinglePerSec) it explains the one-at-a-time
// rate, and so what the ratios to it mean on another disk.
type benchDiskSync struct {
	Dir          string  `json:"dir"`
	Writes       int     `json:"writes"`
	Bytes        int     `json:"bytes"`
	MedianMicros float64 `json:"median_us"`
	P99Micros    float64 `json:"p99_us"`
}

// benchDiskSyncProbe appends size bytes and fsyncs, n times, to a scratch
// file in dir (the embedded server's data folder, which its start made:
// the same disk), and removes it.
func benchDiskSyncProbe(dir string, n, size int) (benchDiskSync, error) {
	r := benchDiskSync{Dir: filepath.Clean(dir), Writes: n, Bytes: size}
	if n <= 0 {
		return r, fmt.Errorf("bench: disk probe: %d writes", n)
	}
	f, err := os.CreateTemp(dir, "serpent-bench-fsync-*")
	if err != nil {
		return r, fmt.Errorf("bench: disk probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	data := make([]byte, size)
	took := make([]time.Duration, 0, n)
	for i := range n {
		t0 := time.Now()
		if _, err := f.WriteAt(data, int64(i)*int64(size)); err != nil {
			return r, fmt.Errorf("bench: disk probe: %w", err)
		}
		if err := f.Sync(); err != nil {
			return r, fmt.Errorf("bench: disk probe: %w", err)
		}
		took = append(took, time.Since(t0))
	}
	r.MedianMicros, r.P99Micros, _ = quantileMicros(took)
	return r, nil
}
