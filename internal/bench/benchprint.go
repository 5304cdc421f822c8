package bench

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
)

// machine describes where the bench runs: on an embedded server (fsync on
// every write, one replica) or on an existing one, whose fsync it cannot
// see.
func machine(existing bool) benchMachine {
	if existing {
		return benchMachine{Server: "existing", CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Fsync: "as the server is configured"}
	}
	return benchMachine{Server: "embedded", Replicas: 1, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Fsync: "always"}
}

func printBench(w io.Writer, r Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "serpent bench: %d CPUs, %s, %s JetStream, fsync %s, %s; phases %s\n\n", r.Machine.CPUs, r.Machine.GoVersion,
		r.Machine.Server, r.Machine.Fsync, replicasText(r.Machine.Replicas), strings.Join(r.Phases, ","))
	fmt.Fprintln(tw, "phase\trate\tdetail")
	if r.Raw.Messages > 0 {
		fmt.Fprintf(tw, "raw, one at a time\t%.0f msg/s\t%d messages of %d bytes, each waiting for its ack\n", r.Raw.SinglePerSec, r.Raw.Messages, r.Raw.PayloadBytes)
		fmt.Fprintf(tw, "raw, one at a time, memory\t%.0f msg/s\tthe same to a stream in memory: the round trip without the disk\n", r.Raw.MemorySinglePerSec)
		if d := r.Raw.DiskSync; d != nil {
			fmt.Fprintf(tw, "raw, disk write and fsync\t%.0f µs median\tp99 %.0f µs; %d writes of %d bytes in the data folder, without the server\n", d.MedianMicros, d.P99Micros, d.Writes, d.Bytes)
		}
		fmt.Fprintf(tw, "raw, atomic batches of 100\t%.0f msg/s\t\n", r.Raw.Batch100Sec)
		fmt.Fprintf(tw, "raw, atomic batches of 1000\t%.0f msg/s\t%d messages\n", r.Raw.Batch1000Sec, 10*r.Raw.Messages)
	}
	e2e := func(name string, e *benchE2E, ratio float64) {
		if e == nil {
			return
		}
		fmt.Fprintf(tw, "%s\t%.0f jobs/s\t%d jobs in %.1f s (%.1f s of it waiting for the projections); %s%s\n",
			name, e.JobsPerSec, e.Jobs, e.Seconds, e.ProjectionSeconds, finished(e.Finished), ratioText(ratio))
		fmt.Fprintf(tw, "\t\tper job: %.2f events in %.2f appends (%.2f messages), %.2f timer/work, %.2f projection values and 1 command message\n",
			e.EventsPerJob, e.AppendsPerJob, e.EventMsgsPerJob, e.WorkPerJob, e.ProjectionPerJob)
		fmt.Fprintf(tw, "\t\tCPU: %.0f µs a job, %.2f of %d cores busy (this process: %s)\n",
			e.CPUMicrosPerJob, e.CoresBusy, r.Machine.CPUs, cpuWhose(r.Machine.Server))
		if e.CPUByPart != nil {
			fmt.Fprintf(tw, "\t\tCPU a job by part, as a profile sampled it: %s\n", cpuPartsText(e.CPUByPart))
		}
		if l := e.LatencyMillis; l != nil {
			search := ""
			if e.SearchSeconds > 0 {
				search = fmt.Sprintf(" (its search took %v of it)", time.Duration(e.SearchSeconds*float64(time.Second)).Round(time.Millisecond))
			}
			fmt.Fprintf(tw, "\t\ta job from its command to its last event: median %.1f ms, p99 %.1f ms, max %.1f ms%s\n", l.Median, l.P99, l.Max, search)
		}
	}
	e2e("end to end, happy path", r.HappyPath, r.Ratios.HappyPathToRawSingle)
	if e := r.Steady; e != nil {
		e2e(fmt.Sprintf("end to end, steady %.0f/s", e.PacePerSec), e, 0)
	}
	e2e("end to end, fault mix", r.Faults, r.Ratios.FaultsToRawSingle)
	if p := r.Replay; p != nil && p.Empty {
		fmt.Fprintf(tw, "replay\tnot measured\tthe event log is empty: run the happy or faults phase first, or seed it with --replay-events N\n")
	} else if p != nil {
		if s := p.Seeded; s != nil {
			fmt.Fprintf(tw, "replay, seeding (setup)\t%.0f events/s\t%s\n", s.EventsPerSec, seedDetail(*s))
		}
		if c := p.CatchUp; c != nil {
			fmt.Fprintf(tw, "replay, projection catch-up\t%.0f events/s\t%d seeded events (%d messages) applied by the engine's projections in %.1f s from its start on the log (fsync always, the fold of its metrics alongside)\n",
				c.EventsPerSec, c.Events, c.Messages, c.Seconds)
		}
		verdict := "audit OK: no violations"
		if !p.Audit.OK {
			verdict = fmt.Sprintf("AUDIT FAILED: %d violations %v", p.Audit.Violations, p.Audit.Rules)
		}
		fmt.Fprintf(tw, "replay, audit\t%.0f events/s\t%d events of %d jobs in %.1f s (GOGC=%d); %s%s\n",
			p.Audit.EventsPerSec, p.Audit.Events, p.Audit.Jobs, p.Audit.Seconds, p.Audit.GCPercent, verdict, ratioText(r.Ratios.AuditToRawSingle))
		fmt.Fprintf(tw, "replay, projection rebuild\t%.0f events/s\t%d events: the fold %.1f s (%.0f events/s), the running projector's lease handed over in %.1f s (not counted), the switch %.1f s; %d values: %d unchanged, %d written, %d deleted%s\n",
			p.Rebuild.EventsPerSec, p.Rebuild.Events, p.Rebuild.FoldSeconds, p.Rebuild.FoldEventsPerSec, p.Rebuild.LeaseWaitSeconds, p.Rebuild.SwitchSeconds,
			p.Rebuild.Values, p.Rebuild.Unchanged, p.Rebuild.Written, p.Rebuild.Deleted, ratioText(r.Ratios.RebuildToRawSingle))
	}
	if s := r.Scale; s != nil {
		fmt.Fprintf(tw, "scale, seeding (setup)\t%.0f events/s\t%s\n", s.Seed.EventsPerSec, seedDetail(s.Seed))
		load := func(l benchLoad, extra string) {
			fmt.Fprintf(tw, "scale, load one job at %d jobs\t%.0f µs median\tp99 %.0f µs, max %.0f µs; %d random loads of %.1f events, %d messages in the log%s\n",
				l.Jobs, l.MedianMicros, l.P99Micros, l.MaxMicros, l.Loads, l.EventsPerLoad, l.StreamMsgs, extra)
		}
		load(s.Small, "")
		load(s.Large, fmt.Sprintf("; median %.2fx, p99 %.2fx the %d-job figures (target: 1.5x at most)", s.LoadMedianRatio, s.LoadP99Ratio, s.Small.Jobs))
		if l := s.Recent; l.Loads > 0 {
			fmt.Fprintf(tw, "scale, load one recent job\t%.0f µs median\tp99 %.0f µs, max %.0f µs; %d random loads among the newest %d of %d jobs (the jobs an engine works on); median %.2fx the %d-job figure\n",
				l.MedianMicros, l.P99Micros, l.MaxMicros, l.Loads, l.Jobs-l.From, l.Jobs, s.LoadRecentMedianRatio, s.Small.Jobs)
		}
		printChild(tw, "scale, engine process memory", s.Engine, "(target: under 300 MB)")
		if e := s.EngineSmall; e != nil {
			printChild(tw, "scale, engine on the small log", *e, fmt.Sprintf("(to compare with: at %d jobs, fresh jobs %.2fx and peak RSS %.2fx these)", s.Jobs, s.FreshRatio, s.PeakRSSRatio))
		}
		fmt.Fprintf(tw, "scale, bench process memory\t%.0f MB peak RSS\tthis bench process: its embedded NATS servers (the scale log's included) and its in-process engine, not the engine process\n", s.BenchPeakRSSMB)
	}
	if f := r.Inflight; f != nil {
		fmt.Fprintf(tw, "inflight, seeding (setup)\t%.0f events/s\t%d jobs in flight (slots from two days ahead), %d events and %d timers written in %.1f s (fsync %s); %d timers left out as lost\n",
			f.Seed.EventsPerSec, f.Seed.Jobs, f.Seed.Events, f.Seed.Jobs-f.LostTimers, f.Seed.Seconds, f.Seed.Fsync, f.LostTimers)
		printInflight(tw, "inflight, engine process memory", f.Engine, "")
		if e := f.EngineSmall; e != nil {
			printInflight(tw, "inflight, engine on the small log", *e, fmt.Sprintf(" (to compare with: at %d jobs in flight, peak RSS %.2fx this)", f.Jobs, f.PeakRSSRatio))
		}
	}
	if rt := r.Retention; rt != nil {
		printRetention(tw, *rt)
	}
	fmt.Fprintf(tw, "memory, bench process\t%.0f MB peak RSS\t%.0f MB peak heap (this process over the whole run: the in-process engine, the embedded servers and the bench together; the replay phase's audit, at GOGC=400, included)\n", r.Memory.PeakRSSMB, r.Memory.PeakHeapMB)
	return tw.Flush()
}

// printChild prints the row of the engine run as a child process.
func printChild(tw io.Writer, row string, e benchChild, note string) {
	if !e.Measured {
		fmt.Fprintf(tw, "%s\tnot measured\t%s\n", row, e.Why)
		return
	}
	caught := "projections and metrics"
	if !e.Projections {
		caught = "metrics; no projections"
	}
	fmt.Fprintf(tw, "%s\t%.0f MB peak RSS\tserpent run as a child process on %d finished jobs %s: started in %.1f s, caught up (%s) in %.1f s, %.0f events/s (%.0f messages/s), at %.0f MB RSS",
		row, e.PeakRSSMB, e.Jobs, note, e.StartSeconds, caught, e.CatchUpSeconds, e.CatchUpEventsPerSec, e.CatchUpMsgsPerSec, e.RSSAfterCatchUpMB)
	if f := e.FreshJobs; f != nil {
		fmt.Fprintf(tw, ", then %d fresh jobs at %.0f jobs/s (%s)", f.Jobs, f.JobsPerSec, finished(f.Finished))
	}
	if a := e.Restart; a != nil {
		from := fmt.Sprintf("from its metrics checkpoint at %d", a.ResumedFrom)
		if a.ResumedFrom == 0 {
			from = "from the log's start (no checkpoint"
			if a.Why != "" {
				from += ": " + a.Why
			}
			from += ")"
		}
		fmt.Fprintf(tw, "; started again, caught up in %.1f s %s, %.0f MB peak RSS", a.CatchUpSeconds, from, a.PeakRSSMB)
	}
	fmt.Fprintln(tw)
}

// printInflight prints the row of the engine started on jobs in flight.
func printInflight(tw io.Writer, row string, e benchInflightEngine, note string) {
	if !e.Measured {
		fmt.Fprintf(tw, "%s\tnot measured\t%s\n", row, e.Why)
		return
	}
	start := func(s benchInflightStart) string {
		return fmt.Sprintf("caught up (metrics) in %.1f s, swept %d jobs in %.1f s re-arming %d lost timers, %.0f MB RSS, %.0f MB peak",
			s.CatchUpSeconds, s.SweptJobs, s.SweepSeconds, s.Rearmed, s.RSSMB, s.PeakRSSMB)
	}
	from := fmt.Sprintf("from its metrics checkpoint at %d", e.Restart.ResumedFrom)
	if e.Restart.ResumedFrom == 0 {
		from = "from the log's start (no checkpoint: " + e.Restart.Why + ")"
	}
	fmt.Fprintf(tw, "%s\t%.0f MB peak RSS\tserpent run --projections=false as a child process on %d jobs in flight%s: %s; started again, %s %s\n",
		row, e.First.PeakRSSMB, e.Jobs, note, start(e.First), from, start(e.Restart))
}

// ratioText is a rate's ratio to the raw one-at-a-time publish rate, if
// the raw phase ran.
func ratioText(r float64) string {
	if r == 0 {
		return ""
	}
	return fmt.Sprintf("; %.2fx raw one-at-a-time", r)
}

// seedDetail describes how a log was seeded.
func seedDetail(s benchSeedInfo) string {
	ids := "without Nats-Msg-Id"
	if s.MsgIDs {
		ids = "with Nats-Msg-Id"
	}
	proj := "the projections left to the engine"
	if s.ProjectionSeconds > 0 {
		proj = fmt.Sprintf("applied to the projections %.1f s later", s.ProjectionSeconds)
	}
	return fmt.Sprintf("%d finished jobs, %d events written in %.1f s (%s, fsync %s), %s",
		s.Jobs, s.Events, s.Seconds, ids, s.Fsync, proj)
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

// replicasText says how many replicas SERP_EVENTS has.
func replicasText(n int) string {
	switch n {
	case 0:
		return "replicas unknown"
	case 1:
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}

// cpuWhose says whose CPU time the bench process's figures hold.
func cpuWhose(server string) string {
	if server == "embedded" {
		return "the server, the engine, the sandbox and the bench"
	}
	return "the engine, the sandbox and the bench; not the server"
}

// printRetention prints one row per horizon of the retention phase.
func printRetention(tw io.Writer, rt benchRetention) {
	fmt.Fprintf(tw, "retention	%.0f jobs/s	%d jobs over %d horizons of %v; engine RSS is of the %s\n",
		rt.JobsPerSec, rt.Jobs, len(rt.Horizons)-1, time.Duration(rt.HorizonSeconds*float64(time.Second)), rt.EngineRSS)
	for _, h := range rt.Horizons {
		name := fmt.Sprintf("after horizon %d", h.Horizon)
		if h.Horizon == len(rt.Horizons) {
			name = "every job finished"
		}
		fmt.Fprintf(tw, "\t\t%s: %d jobs published; live %d subjects, %d msgs, %.2f MB; archive %d msgs, %.2f MB in %.2f MB on disk (%.2fx)\n",
			name, h.Published, h.LiveSubjects, h.LiveMsgs, float64(h.LiveBytes)/(1<<20), h.ArchiveMsgs, float64(h.ArchiveBytes)/(1<<20), h.ArchiveDiskMB, h.Compression)
		fmt.Fprintf(tw, "\t\t  heap %.1f MB, engine RSS %.1f MB, recent job load %.0f µs; audit %d events of %d jobs at %.0f ev/s, %d purchases; ledger join: %s\n",
			h.ServerHeapMB, h.EngineRSSMB, h.LoadMicros, h.AuditEvents, h.AuditJobs, h.AuditEventsPerSec, h.Purchases, h.LedgerVerdict)
	}
}
