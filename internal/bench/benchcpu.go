package bench

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	snats "github.com/serpent-engine/serpent/nats"
)

// The parts of the bench process an end-to-end phase's CPU time is split
// into, by the pprof label snats.ProfileLabel its goroutines carry: the
// embedded server labels its own (snats.ProfilePartServer; its streams'
// and consumers' goroutines carry the server's labels instead, which count
// as the server's too), the bench labels the engine, the sandbox and
// itself. The rest is "other": the runtime's own work (the scheduler, the
// garbage collector's workers) and goroutines nobody started under a
// label, such as timers' callbacks (among them the server firing message
// schedules).
const (
	partEngine  = "engine"
	partSandbox = "sandbox"
	partBench   = "bench"
	partOther   = "other"
)

// cpuParts is the order the parts are printed in.
var cpuParts = []string{partEngine, snats.ProfilePartServer, partSandbox, partBench, partOther}

// withPart runs fn with the goroutine, and the goroutines it starts,
// labelled as working for part.
func withPart(ctx context.Context, part string, fn func(context.Context)) {
	pprof.Do(ctx, pprof.Labels(snats.ProfileLabel, part), fn)
}

// cpuSplit is a CPU profile of the process taken over one phase, to split
// the phase's CPU time by part.
type cpuSplit struct {
	buf     bytes.Buffer
	stopped bool
}

// startCPUSplit starts profiling; it fails if a profile is being taken
// already (--cpuprofile).
func startCPUSplit() (*cpuSplit, error) {
	s := &cpuSplit{}
	if err := pprof.StartCPUProfile(&s.buf); err != nil {
		return nil, err
	}
	return s, nil
}

// abort ends the profile, if it runs, and drops it; a nil split is fine.
func (s *cpuSplit) abort() {
	if s != nil && !s.stopped {
		s.stopped = true
		pprof.StopCPUProfile()
	}
}

// stop ends the profile and returns the CPU time sampled for each part.
func (s *cpuSplit) stop() (map[string]time.Duration, error) {
	s.abort()
	p, err := profile.Parse(&s.buf)
	if err != nil {
		return nil, fmt.Errorf("bench: the CPU profile: %w", err)
	}
	idx := slices.IndexFunc(p.SampleType, func(t *profile.ValueType) bool { return t.Type == "cpu" && t.Unit == "nanoseconds" })
	if idx < 0 {
		return nil, fmt.Errorf("bench: the CPU profile has no cpu/nanoseconds samples")
	}
	out := map[string]time.Duration{}
	for _, sm := range p.Sample {
		part := partOther
		if l := sm.Label[snats.ProfileLabel]; len(l) > 0 && slices.Contains(cpuParts, l[0]) {
			part = l[0]
		} else if len(sm.Label[snats.ProfileLabelServerOwn]) > 0 {
			part = snats.ProfilePartServer
		}
		out[part] += time.Duration(sm.Value[idx])
	}
	return out, nil
}

// perJob turns the CPU time of each part into microseconds a job.
func perJob(parts map[string]time.Duration, jobs int) map[string]float64 {
	out := make(map[string]float64, len(parts))
	for part, d := range parts {
		out[part] = float64(d.Microseconds()) / float64(max(jobs, 1))
	}
	return out
}

// cpuPartsText is the split for the table: "engine 231 µs, nats-server
// 198 µs, ...", in a fixed order, with the sampled share of the whole.
func cpuPartsText(parts map[string]float64) string {
	var b strings.Builder
	total := 0.0
	for _, v := range parts {
		total += v
	}
	for _, part := range cpuParts {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.0f µs (%.0f %%)", part, parts[part], 100*parts[part]/max(total, 1))
	}
	return b.String()
}
