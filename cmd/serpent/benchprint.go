package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/serpent-engine/serpent/aggregate"
)

func machine() benchMachine {
	return benchMachine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Fsync: "always"}
}

func printBench(w io.Writer, r benchReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "serpent bench: %d CPUs, %s, embedded JetStream, fsync %s, 1 replica\n\n", r.Machine.CPUs, r.Machine.GoVersion, r.Machine.Fsync)
	fmt.Fprintln(tw, "phase\trate\tdetail")
	if r.Raw.Messages > 0 {
		fmt.Fprintf(tw, "raw, one at a time\t%.0f msg/s\t%d messages of %d bytes, each waiting for its ack\n", r.Raw.SinglePerSec, r.Raw.Messages, r.Raw.PayloadBytes)
		fmt.Fprintf(tw, "raw, atomic batches of 100\t%.0f msg/s\t\n", r.Raw.Batch100Sec)
	}
	e2e := func(name string, e *benchE2E, ratio float64) {
		if e == nil {
			return
		}
		fmt.Fprintf(tw, "%s\t%.0f jobs/s\t%d jobs in %.1f s; %.2f events, %.2f timer/work and 1 command message per job; %s; %.2fx raw one-at-a-time\n",
			name, e.JobsPerSec, e.Jobs, e.Seconds, e.EventsPerJob, e.WorkPerJob, finished(e.Finished), ratio)
	}
	e2e("end to end, happy path", r.HappyPath, r.Ratios.HappyPathToRawSingle)
	e2e("end to end, fault mix", r.Faults, r.Ratios.FaultsToRawSingle)
	fmt.Fprintf(tw, "memory\t%.0f MB peak RSS\t%.0f MB peak heap (engine, embedded server and bench together)\n", r.Memory.PeakRSSMB, r.Memory.PeakHeapMB)
	return tw.Flush()
}

func finished(m map[aggregate.Status]int) string {
	var parts []string
	for _, k := range []aggregate.Status{aggregate.StatusSucceeded, aggregate.StatusFailed, aggregate.StatusChargedNoResult, aggregate.StatusCancelled} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
		}
	}
	return strings.Join(parts, ", ")
}

// progressFunc reports how far a phase got.
type progressFunc func(phase string, done, total int)

// benchProgress draws one line per phase on w, redrawn in place.
func benchProgress(w io.Writer, on bool) progressFunc {
	if !on {
		return func(string, int, int) {}
	}
	var mu sync.Mutex
	last := ""
	lastPct := -1
	return func(phase string, done, total int) {
		mu.Lock()
		defer mu.Unlock()
		pct := done * 100 / max(total, 1)
		if phase == last && pct == lastPct {
			return
		}
		if phase != last && last != "" {
			fmt.Fprintln(w)
		}
		last, lastPct = phase, pct
		bar := strings.Repeat("#", pct/4) + strings.Repeat(".", 25-pct/4)
		fmt.Fprintf(w, "\r%-28s [%s] %3d%% %d/%d", phase, bar, pct, done, total)
		if done >= total {
			fmt.Fprintln(w)
			last = ""
		}
	}
}

// syncWriter is a writer safe to read while another goroutine writes.
type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncWriter) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
