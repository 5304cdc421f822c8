package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/serpent-engine/serpent/audit"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// benchReplay is the replay phase: the whole log read back by the audit
// and by a projection rebuild.
type benchReplay struct {
	// Seeded is set when finished jobs were written first to reach
	// --replay-events.
	Seeded *benchSeedInfo `json:"seeded,omitempty"`
	// Messages is the log's length when replayed, Events the events
	// they hold (as the audit counted them: an append of several events
	// is one message); Empty says there was nothing to replay (no
	// end-to-end phase ran and --replay-events was not given), and
	// nothing was measured.
	Messages uint64 `json:"messages"`
	Events   uint64 `json:"events"`
	Empty    bool   `json:"empty,omitempty"`
	// CatchUp is the engine's projections catching up with the seeded
	// events, when there are any.
	CatchUp *benchCatchUp `json:"catch_up,omitempty"`
	Audit   benchAudit    `json:"audit"`
	Rebuild benchRebuild  `json:"rebuild"`
}

// benchCatchUp is the engine started again on the seeded log (serpent run
// on an existing log): its projection runner applies the seeded events
// from its checkpoint, on a server that fsyncs every write, while the
// engine's other start-up work (the fold of its metrics) runs alongside.
type benchCatchUp struct {
	// Events are the seeded events (Messages the messages holding them),
	// Seconds from the engine's start until the projections have no event
	// left to apply.
	Events       uint64  `json:"events"`
	Messages     uint64  `json:"messages"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
}

// benchAudit is one audit of the whole log (audit.CheckLog, as
// serpent audit runs it, GOGC included).
type benchAudit struct {
	Events       int     `json:"events"`
	Jobs         int     `json:"jobs"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_sec"`
	GCPercent    int     `json:"gc_percent"`
	// OK is true when the audit found no violation.
	OK         bool            `json:"ok"`
	Violations int             `json:"violations"`
	Rules      map[string]int  `json:"rules,omitempty"`
	First      []audit.Finding `json:"first_violations,omitempty"`
}

// benchRebuild is one projection rebuild (projector.Rebuild, as serpent
// projections rebuild runs it) beside the running engine: the whole log
// folded into staging buckets, the runners paused, the values switched.
type benchRebuild struct {
	Events uint64 `json:"events"`
	// Seconds is the whole rebuild; EventsPerSec counts the fold and the
	// switch only, not the wait for the running projector's lease between
	// them (LeaseWaitSeconds: a handover that does not grow with the log).
	Seconds          float64 `json:"seconds"`
	EventsPerSec     float64 `json:"events_per_sec"`
	LeaseWaitSeconds float64 `json:"lease_wait_seconds"`
	SwitchSeconds    float64 `json:"switch_seconds"`
	// Fold is the first part alone: reading and folding the log into the
	// staging buckets, before the pause and the switch.
	FoldSeconds      float64 `json:"fold_seconds"`
	FoldEventsPerSec float64 `json:"fold_events_per_sec"`
	Values           int     `json:"values"`
	Unchanged        int     `json:"unchanged"`
	Written          int     `json:"written"`
	Deleted          int     `json:"deleted"`
}

// replay runs the replay phase on the in-process engine's log.
func (b *benchRun) replay(ctx context.Context) (benchReplay, error) {
	var r benchReplay
	have, err := streamMsgs(ctx, b) // each holds one event or more
	if err != nil {
		return r, err
	}
	if want := uint64(b.f.replayEvents); want > have {
		seeded, catchUp, err := b.seedEngineLog(ctx, have, want)
		if err != nil {
			return r, err
		}
		r.Seeded, r.CatchUp = &seeded, &catchUp
	}
	// Nothing else running: the engine's projections are up to date, and
	// it is done starting (its metrics' fold of the log has caught up for
	// its sweep for lost timers, and stopped).
	if err := waitProjections(ctx, b.js, time.Hour); err != nil {
		return r, fmt.Errorf("bench replay: %w", err)
	}
	waitQuiet(ctx, 10*time.Minute)
	if r.Messages, err = streamMsgs(ctx, b); err != nil {
		return r, err
	}
	if r.Messages == 0 {
		r.Empty = true
		return r, nil
	}

	// The audit, with serpent audit's GOGC. Not with its memory limit
	// (audit.TuneGC): that follows the heap of the audit's own process, and
	// this one also holds the embedded server and the engine, whose heap
	// would bring it down at sizes where serpent audit's own heap stays
	// far below it (a quarter fewer events a second at a million events).
	gc := debug.SetGCPercent(audit.GCPercent)
	start := time.Now()
	var a *audit.Auditor
	log, err := snats.NewAuditLog(ctx, snats.EventLog(b.js), 0, func(done, total uint64) { b.prog("replay: audit", int(done), int(total)) })
	if err == nil {
		a, err = audit.CheckLog(ctx, log, audit.Options{Now: time.Now(), WithoutLedger: true}) // as serpent audit without --ledger
	}
	var rep audit.Report
	if err == nil {
		rep = a.Report()
	}
	took := time.Since(start)
	debug.SetGCPercent(gc)
	if err != nil {
		return r, fmt.Errorf("bench replay: audit: %w", err)
	}
	r.Events = uint64(rep.Events)
	r.Audit = benchAudit{Events: rep.Events, Jobs: rep.Jobs, Seconds: round2(took.Seconds()), EventsPerSec: perSec(rep.Events, took),
		GCPercent: audit.GCPercent, OK: rep.OK(), Violations: len(rep.Violations), Rules: rep.Rules}
	if len(rep.Violations) > 0 {
		r.Audit.First = rep.Violations[:min(3, len(rep.Violations))]
	}

	// The rebuild, beside the running engine.
	var foldDone, switchStart time.Time
	start = time.Now()
	rr, err := projector.Rebuild(ctx, b.js, projector.RebuildOptions{
		Projection: projections.Config{PriceMicrosPerPage: projections.DefaultPriceMicrosPerPage},
		Progress: func(phase string, done, total uint64) {
			if phase == "events" && foldDone.IsZero() && total > 0 && done >= total {
				foldDone = time.Now()
			}
			if phase != "events" && switchStart.IsZero() {
				switchStart = time.Now()
			}
			b.prog("replay: rebuild, "+phase, int(done), int(total))
		}})
	end := time.Now()
	took = end.Sub(start)
	if err != nil {
		return r, fmt.Errorf("bench replay: rebuild: %w", err)
	}
	if foldDone.IsZero() {
		foldDone = end
	}
	if switchStart.IsZero() || switchStart.Before(foldDone) {
		switchStart = foldDone
	}
	fold, wait, switching := foldDone.Sub(start), switchStart.Sub(foldDone), end.Sub(switchStart)
	r.Rebuild = benchRebuild{Events: rr.Events, Seconds: round2(took.Seconds()), EventsPerSec: perSec(int(rr.Events), fold+switching),
		LeaseWaitSeconds: round2(wait.Seconds()), SwitchSeconds: round2(switching.Seconds()),
		FoldSeconds: round2(fold.Seconds()), FoldEventsPerSec: perSec(int(rr.UpTo), fold),
		Values: rr.Values, Unchanged: rr.Unchanged, Written: rr.Written, Deleted: rr.Deleted}
	return r, nil
}

// seedEngineLog stops the engine, seeds finished jobs into its log until it
// holds want events (on a server that fsyncs less often, as seeding is
// setup), starts the engine again and times its projections catching up
// with the seeded events.
func (b *benchRun) seedEngineLog(ctx context.Context, have, want uint64) (benchSeedInfo, benchCatchUp, error) {
	seeder := newBenchSeeder("replay", true)
	info := benchSeedInfo{MsgIDs: seeder.msgIDs, Fsync: "every " + seedSync.String()}
	var c benchCatchUp
	b.stopEngine()
	perJob := 6.0 // a first guess of events per seeded job (on the high side), then measured
	from := have
	for jobs := 0; have < want; {
		n := int(float64(want-have)/perJob) + 1
		got, err := seedOffline(ctx, filepath.Join(b.dir, "data"), seeder, jobs, jobs+n, "replay: seeding", b.prog, false)
		if err != nil {
			return info, c, err
		}
		info.add(got)
		jobs += n
		have += got.Events
		perJob = float64(info.Events) / float64(info.Jobs)
	}
	start := time.Now()
	if err := b.startEngine(ctx); err != nil {
		return info, c, err
	}
	if err := waitProjections(ctx, b.js, 2*time.Hour); err != nil {
		return info, c, fmt.Errorf("bench replay: %w", err)
	}
	took := time.Since(start)
	msgs, err := streamMsgs(ctx, b)
	if err != nil {
		return info, c, err
	}
	c = benchCatchUp{Events: info.Events, Messages: msgs - min(from, msgs), Seconds: round2(took.Seconds()), EventsPerSec: perSec(int(info.Events), took)}
	return info, c, nil
}

// streamMsgs is how many messages the engine's log holds.
func streamMsgs(ctx context.Context, b *benchRun) (uint64, error) {
	st, err := streamState(ctx, b.js, snats.EventStream)
	return st.Msgs, err
}

// waitQuiet waits, up to bound, until this process (the engine and the
// server it embeds) uses less than a fifth of a CPU for a second.
func waitQuiet(ctx context.Context, bound time.Duration) {
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); {
		c0, t0 := processCPU(), time.Now()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		if float64(processCPU()-c0) < 0.2*float64(time.Since(t0)) {
			return
		}
	}
}

// processCPU is the CPU time this process has used so far, user and
// system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
