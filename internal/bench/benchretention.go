package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/audit"
	snats "github.com/serpent-engine/serpent/nats"
)

// benchRetention is the retention phase: jobs run through the engine at
// a steady rate for several horizons of compressed time, while jobs leave
// the live log and the archive keeps them.
type benchRetention struct {
	HorizonSeconds float64 `json:"horizon_seconds"`
	JobsPerSec     float64 `json:"jobs_per_sec"`
	Jobs           int     `json:"jobs"`
	// EngineRSS says whose memory EngineRSSMB is: "engine process" when
	// the engine ran as a child process, else this whole process.
	EngineRSS string                 `json:"engine_rss_of"`
	Horizons  []benchRetentionSample `json:"horizons"`
}

// benchRetentionSample is what the phase measured at the end of one
// horizon.
type benchRetentionSample struct {
	Horizon       int     `json:"horizon"`
	Published     int     `json:"published"`
	LiveSubjects  uint64  `json:"live_subjects"`
	LiveMsgs      uint64  `json:"live_msgs"`
	LiveBytes     uint64  `json:"live_bytes"`
	ArchiveMsgs   uint64  `json:"archive_msgs"`
	ArchiveBytes  uint64  `json:"archive_bytes"`
	ArchiveDiskMB float64 `json:"archive_disk_mb"`
	// Compression is the archive's message bytes over its bytes on disk.
	Compression float64 `json:"compression"`
	// ServerHeapMB is this process's live Go heap after a collection: the
	// embedded server's, and the engine's too when it is not a child
	// process.
	ServerHeapMB float64 `json:"server_heap_mb"`
	EngineRSSMB  float64 `json:"engine_rss_mb"`
	// LoadMicros is the median load of a job finished a second or more
	// ago, from the live log.
	LoadMicros float64 `json:"recent_job_load_us"`
	// The audit of archive and live log, with the ledger join.
	AuditEvents       int     `json:"audit_events"`
	AuditJobs         int     `json:"audit_jobs"`
	AuditEventsPerSec float64 `json:"audit_events_per_sec"`
	Purchases         int     `json:"purchases"`
	Violations        int     `json:"violations"`
	LedgerVerdict     string  `json:"ledger_verdict"`
}

// retention runs the retention phase on a server of its own.
func (b *benchRun) retention(ctx context.Context) (benchRetention, error) {
	f := b.f
	r := benchRetention{HorizonSeconds: f.retHorizon.Seconds(), JobsPerSec: f.retRate}
	dir := filepath.Join(b.dir, "retention")
	srv, nc, js, err := startBenchServer(dir, 0)
	if err != nil {
		return r, err
	}
	defer srv.Shutdown()
	defer nc.Close()
	// The engine keeps jobs for the horizon; a job's age budget and the
	// clock skew margin are a second, so the horizon may be seconds.
	extra := []string{"--retention", f.retHorizon.String(), "--max-age", "1s", "--skew-margin", "1s"}
	rss := func() float64 { return float64(procStatus(0, "VmRSS")) / (1 << 20) }
	r.EngineRSS = "this process (bench, engine and server)"
	if bin, _ := engineBinary(b.env); bin != "" {
		p, err := b.startChild(ctx, bin, srv.ClientURL(), true, extra...)
		if err != nil {
			return r, err
		}
		defer p.stop()
		// Its status page listens before its streams exist: a command
		// published before it is ready finds no stream to take it.
		if err := b.childCatchUp(ctx, p, js, 0, true, "retention: engine starting"); err != nil {
			return r, err
		}
		pid := p.cmd.Process.Pid
		rss = func() float64 { return float64(procStatus(pid, "VmRSS")) / (1 << 20) }
		r.EngineRSS = "engine process"
	} else {
		eng, err := startBenchEngine(ctx, b.serpent, append([]string{"--nats-url", srv.ClientURL()}, extra...), nil, b.sbURL, b.f.workers)
		if err != nil {
			return r, err
		}
		defer eng.stop()
	}
	st, err := snats.NewEventStore(ctx, js, snats.EventStoreOptions{})
	if err != nil {
		return r, err
	}
	var recent []string // jobs published, oldest first
	perTick := max(1, int(f.retRate/10))
	tick := time.Duration(float64(perTick) / f.retRate * float64(time.Second))
	for h := 1; h <= f.retHorizons; h++ {
		end := time.Now().Add(f.retHorizon)
		for time.Now().Before(end) {
			next := time.Now().Add(tick)
			slot := time.Now().UTC().Truncate(time.Second).Format(time.RFC3339)
			msgs := make([]*natsgo.Msg, perTick)
			for i := range msgs {
				cmd := aggregate.ScheduleCommand{Slot: slot, Query: fmt.Sprintf("retention %d", len(recent)), Country: "US", Language: "en", Device: "desktop"}
				data, err := json.Marshal(cmd)
				if err != nil {
					return r, err
				}
				msgs[i] = &natsgo.Msg{Subject: snats.ScheduleSubject, Data: data}
				c, _ := aggregate.NewSchedule(cmd, aggregate.DefaultPolicy(), "")
				recent = append(recent, c.JobID)
			}
			if _, err := jetstreamext.PublishMsgBatch(ctx, js, msgs); err != nil {
				return r, fmt.Errorf("bench retention: publish: %w", err)
			}
			select {
			case <-ctx.Done():
				return r, ctx.Err()
			case <-time.After(time.Until(next)):
			}
		}
		s, err := b.retentionSample(ctx, js, st, dir, recent, rss)
		if err != nil {
			return r, err
		}
		s.Horizon = h
		r.Horizons = append(r.Horizons, s)
		b.prog("retention horizons", h, f.retHorizons)
	}
	r.Jobs = len(recent)
	// Every job finished and counted once: the audit over archive and
	// live log sees each job published, bought once.
	err = pollUntil(ctx, 2*time.Minute, 500*time.Millisecond, func() (bool, string, error) {
		rep, _, err := b.retentionAudit(ctx, srv.ClientURL())
		if err != nil {
			return false, "", err
		}
		if rep.Jobs == r.Jobs && rep.Statuses[aggregate.StatusSucceeded] == r.Jobs {
			return true, "", nil
		}
		return false, fmt.Sprintf("%d of %d jobs in the audit, %d succeeded", rep.Jobs, r.Jobs, rep.Statuses[aggregate.StatusSucceeded]), nil
	})
	if err != nil {
		return r, fmt.Errorf("bench retention: %w", err)
	}
	last, err := b.retentionSample(ctx, js, st, dir, recent, rss)
	if err != nil {
		return r, err
	}
	last.Horizon = f.retHorizons + 1 // after publishing stopped, every job finished
	r.Horizons = append(r.Horizons, last)
	return r, nil
}

// retentionSample measures the live log, the archive, memory, a recent
// job's load and the audit.
func (b *benchRun) retentionSample(ctx context.Context, js jetstream.JetStream, st *snats.EventStore, dir string, jobs []string, rss func() float64) (benchRetentionSample, error) {
	s := benchRetentionSample{Published: len(jobs)}
	live, err := streamState(ctx, js, snats.EventStream)
	if err != nil {
		return s, err
	}
	s.LiveSubjects, s.LiveMsgs, s.LiveBytes = live.NumSubjects, live.Msgs, live.Bytes
	arch, err := streamState(ctx, js, snats.ArchiveStream)
	if err != nil {
		return s, err
	}
	s.ArchiveMsgs, s.ArchiveBytes = arch.Msgs, arch.Bytes
	disk := dirBytes(filepath.Join(dir, "jetstream"), snats.ArchiveStream)
	s.ArchiveDiskMB = round2(float64(disk) / (1 << 20))
	if disk > 0 {
		s.Compression = round2(float64(s.ArchiveBytes) / float64(disk))
	}
	// After a collection the heap is what lives: the embedded server's
	// (and the engine's, when it runs in this process), not the garbage
	// of the last audit, which ran here.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.ServerHeapMB = round2(float64(ms.HeapAlloc) / (1 << 20))
	s.EngineRSSMB = round2(rss())

	// A job published a few ticks ago: finished, and in the live log.
	if n := len(jobs); n > 0 {
		job := jobs[max(0, n-1-int(b.f.retRate))]
		var took []float64
		for range 21 {
			start := time.Now()
			if _, _, err := st.Load(ctx, job); err != nil {
				return s, err
			}
			took = append(took, float64(time.Since(start).Microseconds()))
		}
		slices.Sort(took)
		s.LoadMicros = took[len(took)/2]
	}

	rep, secs, err := b.retentionAudit(ctx, js.Conn().ConnectedUrl())
	if err != nil {
		return s, err
	}
	s.AuditEvents, s.AuditJobs, s.Purchases, s.Violations = rep.Events, rep.Jobs, rep.Purchases, len(rep.Violations)
	s.AuditEventsPerSec = round2(float64(rep.Events) / secs)
	s.LedgerVerdict = "no ledger"
	if l := rep.Ledger; l != nil {
		s.LedgerVerdict = ledgerVerdict(rep)
	}
	return s, nil
}

// retentionAudit runs serpent audit over archive and live log, with the
// ledger join against the bench's sandbox, and how long it took.
func (b *benchRun) retentionAudit(ctx context.Context, natsURL string) (audit.Report, float64, error) {
	var out, errOut bytes.Buffer
	start := time.Now()
	err := b.serpent(ctx, []string{"audit", "--nats-url", natsURL, "--ledger", b.sbURL, "-o", "json", "--progress=false"},
		func(string) string { return "" }, &out, &errOut)
	secs := time.Since(start).Seconds()
	var rep audit.Report
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		return rep, secs, fmt.Errorf("bench retention: audit: %w (%v) %s", jerr, err, errOut.String())
	}
	return rep, secs, nil
}

// ledgerVerdict says whether the ledger join found every purchase once.
func ledgerVerdict(rep audit.Report) string {
	if len(rep.Violations) == 0 && rep.DoubleCharges == 0 {
		return "every purchase in the ledger once, none missing"
	}
	return fmt.Sprintf("%d violations, %d double charges", len(rep.Violations), rep.DoubleCharges)
}

// dirBytes is the size on disk of the stream name's files under dir.
func dirBytes(dir, name string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(path, "/streams/"+name+"/") {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	return n
}
