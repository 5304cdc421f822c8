package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/metrics"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/projections"
)

// sweeper repairs lost timers, of recurring schedules and of jobs.
type sweeper struct {
	eng       *engine.Engine
	schedules *engine.Schedules
	js        jetstream.JetStream
	// tally is the metrics' fold of the log: the jobs in flight.
	tally *projections.Tally
	// every is --sweep-every; now the server's clock.
	every time.Duration
	now   func() time.Time
	// mx counts the sweeps (nil: not counted).
	mx  *metrics.Metrics
	log *slog.Logger
	// turns is this engine's turn at the periodic sweeps, once the metrics
	// bucket is found.
	turns *snats.SweepTurn
}

// run sweeps at start and then every s.every. It looks only at the jobs
// the tally says are in flight, once it has counted the log through where
// the log ended when the round began, so its cost follows the jobs in
// flight, not the jobs ever run. A sweep covers every engine's jobs, so
// after the one at start the engines take turns (turn): one sweeps for
// all in each interval. With no sweeps after the first (every 0), it
// calls once after that one, and then returns.
func (s *sweeper) Run(ctx context.Context, once func()) {
	s.sweepSchedules(ctx) // at once: they do not wait for the fold
	own := true           // the first sweep of the jobs, made at start
	for {
		// The jobs in flight as of now: a fold caught up once but behind
		// since (a stalled read, a load it cannot keep up with) would sweep
		// an old list of them, and hold the turn while it did.
		through, err := eventLogLastSeq(ctx, s.js)
		if ctx.Err() != nil {
			return // through is 0 then, which any fold passes
		}
		if err != nil {
			// through 0: a fold caught up once passes, as it did before
			// rounds read the log's end; better than no sweep while the
			// server cannot say where the log ends.
			s.log.Warn("sweep: the event log's last sequence could not be read; taking the fold as it stands", "err", err)
		}
		ids, ok := liveJobs(ctx, s.tally, through, s.every, s.log)
		switch {
		case ok && own:
			// Made, and not recorded: an engine that keeps restarting,
			// or one that sweeps only at start, takes no one's turn.
			s.sweepJobs(ctx, ids)
			own = false
		case ok && s.turn(ctx):
			swept := s.sweepSchedules(ctx)
			if !s.sweepJobs(ctx, ids) || !swept {
				s.leaveTurn(ctx) // the next engine need not wait
			}
		case !ok && ctx.Err() == nil && s.every > 0:
			// The fold is still behind after a round's wait. An engine
			// that cannot sweep the jobs takes no turn, or the others
			// would leave theirs to it; the schedules all the same, and
			// the next round now.
			s.count(metrics.SweepBehind)
			s.sweepSchedules(ctx)
			continue
		}
		if s.every <= 0 {
			once()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.every):
		}
	}
}

// turn says whether this round's periodic sweep is this engine's to
// make, recording it if so (snats.SweepTurn): whether it made the last
// one, or no engine has begun one in the last nine tenths of s.every. If
// the record cannot be read or written, the engine sweeps all the same.
func (s *sweeper) turn(ctx context.Context) bool {
	var (
		mine bool
		last snats.SweepRecord
		err  error
	)
	if s.turns == nil {
		var kv jetstream.KeyValue
		if kv, err = s.js.KeyValue(ctx, snats.MetricsBucket); err == nil {
			s.turns = snats.NewSweepTurn(kv, s.eng.Name(), s.every, s.now)
		}
	}
	if s.turns != nil {
		mine, last, err = s.turns.Take(ctx)
	}
	switch {
	case ctx.Err() != nil:
		return false
	case err != nil:
		s.log.Warn("sweep: the engines' last sweep could not be read or recorded; sweeping all the same", "err", err)
		return true
	case mine:
		return true
	}
	s.count(metrics.SweepLeft)
	s.log.Debug("sweep left to the engine that began one", "by", last.Worker, "began", last.Began)
	return false
}

// leaveTurn gives up the turn this engine took, after its sweep of the
// jobs or of the schedules failed (snats.SweepTurn.Leave).
func (s *sweeper) leaveTurn(ctx context.Context) {
	if ctx.Err() != nil || s.turns == nil {
		return // stopping: the failure was the stop's
	}
	if err := s.turns.Leave(ctx); err != nil && ctx.Err() == nil {
		s.log.Warn("sweep: could not give the turn up after a failed sweep", "err", err)
	}
}

// sweepSchedules re-arms the timers of recurring schedules that lost
// them; false if the sweep failed.
func (s *sweeper) sweepSchedules(ctx context.Context) bool {
	n, err := s.schedules.Sweep(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("sweep for lost schedule timers failed", "err", err)
	case n > 0:
		s.log.Warn("sweep re-armed lost schedule timers", "schedules", n)
	}
	if s.mx != nil && n > 0 {
		s.mx.Rearmed(metrics.TimerOfSchedule, n)
	}
	return err == nil
}

// sweepJobs re-arms the timers of the jobs of ids that lost them; false
// if the sweep failed.
func (s *sweeper) sweepJobs(ctx context.Context, ids *projections.LiveJobs) bool {
	began := time.Now()
	rep, err := s.eng.SweepJobs(ctx, snats.NewTimers(s.js, s.now), ids)
	if err != nil {
		if ctx.Err() == nil {
			s.count(metrics.SweepFailed)
			s.log.Warn("sweep for lost timers failed", "err", err)
		}
		return false
	}
	took := time.Since(began)
	if s.mx != nil {
		s.mx.Rearmed(metrics.TimerOfJob, rep.Rearmed-rep.Held)
		s.mx.Swept(took, rep.Jobs) // last: the round is counted once its figures are
	}
	s.log.Debug("sweep for lost timers done", "jobs", rep.Jobs, "live", rep.Live, "rearmed", rep.Rearmed, "took", took.Round(time.Millisecond))
	switch {
	case rep.Rearmed > rep.Held || rep.Unusable > 0:
		s.log.Warn("sweep re-armed lost timers", "jobs", rep.Jobs, "live", rep.Live, "rearmed", rep.Rearmed, "held", rep.Held, "unusable", rep.Unusable)
	case rep.Held > 0:
		s.log.Debug("sweep armed the timers of jobs claimed under a running lease", "jobs", rep.Jobs, "live", rep.Live, "held", rep.Held)
	}
	return true
}

// count counts a round that swept no jobs, by why.
func (s *sweeper) count(outcome string) {
	if s.mx != nil {
		s.mx.SweepRound(outcome)
	}
}

// liveJobs waits until tally has caught up with the log, and has counted
// it through sequence through, and returns the jobs it says are in
// flight; false if ctx ends first, or wait (when not 0) passes first, so
// that a fold that cannot catch up does not hold the next round's sweep
// of the schedules. A wait of more than a minute is logged, once.
func liveJobs(ctx context.Context, tally *projections.Tally, through uint64, wait time.Duration, log *slog.Logger) (*projections.LiveJobs, bool) {
	start, warned := time.Now(), false
	poll := time.Second
	if wait > 0 {
		poll = min(poll, wait)
	}
	for {
		// The place first: the jobs read after it are as of it or later.
		seq := tally.Seq()
		// Caught up first: the list of a million jobs in flight is not
		// made every second of a fold's catching up, only to be dropped.
		if seq >= through && tally.CaughtUp() {
			if ids, caughtUp := tally.Live(); caughtUp { // not begun again meanwhile
				if warned {
					log.Info("sweep for lost timers: the metrics' fold of the log has caught up", "waited", time.Since(start).Round(time.Second))
				}
				return ids, true
			}
		}
		waited := time.Since(start)
		if wait > 0 && waited >= wait {
			log.Warn("sweep for lost timers skipped: the metrics' fold of the log has not caught up", "waited", waited.Round(time.Second), "counted_seq", tally.Seq(), "log_seq", through)
			return nil, false
		}
		if !warned && waited >= time.Minute {
			log.Warn("sweep for lost timers waits for the metrics' fold of the log to catch up", "waited", waited.Round(time.Second), "counted_seq", tally.Seq(), "log_seq", through)
			warned = true
		}
		select {
		case <-ctx.Done():
			return nil, false
		case <-time.After(poll):
		}
	}
}
