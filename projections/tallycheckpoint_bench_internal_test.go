package projections

import (
	"encoding/binary"
	"testing"
	"time"
)

// BenchmarkCheckpoint writes out the checkpoint of a tally of a million
// jobs in flight, as an engine does every 30 s: B/op is what the
// engine allocates for it, on top of the tally.
func BenchmarkCheckpoint(b *testing.B) {
	t := NewTally().ForgetFinished()
	for i := range 1_000_000 {
		var h hexID
		binary.BigEndian.PutUint64(h[:], uint64(i)*0x9e3779b97f4a7c15)
		binary.BigEndian.PutUint64(h[8:], uint64(i))
		t.jobs[h] = 1
	}
	log := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		cp, _, err := t.Checkpoint(log)
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(cp)))
	}
}
