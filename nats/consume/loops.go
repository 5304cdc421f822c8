package consume

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
)

// Options tune a loop. Every loop has defaults of its own.
type Options struct {
	// Concurrency is how many deliveries are handled at once.
	Concurrency int
	// Grace is how long the handlers may finish after ctx ends before
	// their context is cancelled. A cancelled handler is safe: its
	// delivery is not acknowledged and comes again.
	Grace time.Duration
	// Logger says when deliveries cannot be taken.
	Logger *slog.Logger
}

func (o Options) withDefaults(concurrency int, grace time.Duration) Options {
	if o.Concurrency <= 0 {
		o.Concurrency = concurrency
	}
	if o.Grace <= 0 {
		o.Grace = grace
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Work takes due jobs from cons (the serpent-workers consumer on
// serp.work.>) and steps each with eng until ctx ends (by default 8 at
// once, with 15 s of grace). Then it stops taking work, lets in-flight
// steps finish within the grace period and returns.
func Work(ctx context.Context, eng *engine.Engine, cons jetstream.Consumer, opts Options) error {
	opts = opts.withDefaults(8, 15*time.Second)
	wait := ackWait(cons)
	return loop(ctx, cons, opts.Concurrency, opts.Grace, opts.Logger, func(ctx context.Context, m jetstream.Msg) {
		eng.HandleWork(ctx, strings.TrimPrefix(m.Subject(), snats.WorkSubjectPrefix), msg{m, wait})
	})
}

// Intake takes schedule commands from cons (the serpent-intake consumer
// on serp.cmd.schedule) until ctx ends (by default 16 at once). Each
// becomes a job or a rejection record in rec, and is acknowledged only
// after that is durable. A command on another subject is acknowledged
// and left alone: its own consumer, or the serpent-strays one (Strays),
// has it.
func Intake(ctx context.Context, eng *engine.Engine, rec engine.Rejections, cons jetstream.Consumer, opts Options) error {
	opts = opts.withDefaults(16, 10*time.Second)
	wait := ackWait(cons)
	return loop(ctx, cons, opts.Concurrency, opts.Grace, opts.Logger, func(ctx context.Context, m jetstream.Msg) {
		if m.Subject() != snats.ScheduleSubject {
			_ = m.Ack()
			return
		}
		eng.HandleCommand(ctx, rec, msg{m, wait})
	})
}

// Strays reads every command subject from cons (the serpent-strays
// consumer) until ctx ends (by default 4 at once), and records a command
// on a subject nothing reads as refused (HandleStray).
func Strays(ctx context.Context, eng *engine.Engine, rec engine.Rejections, cons jetstream.Consumer, opts Options) error {
	opts = opts.withDefaults(4, 5*time.Second)
	return loop(ctx, cons, opts.Concurrency, opts.Grace, opts.Logger, func(ctx context.Context, m jetstream.Msg) {
		HandleStray(ctx, eng, rec, msg{Msg: m})
	})
}

// Firing fires recurring schedules whose slot came, from cons (the
// serpent-schedules consumer on serp.sched.due.*), until ctx ends (by
// default 4 at once).
func Firing(ctx context.Context, s *engine.Schedules, cons jetstream.Consumer, opts Options) error {
	opts = opts.withDefaults(4, 10*time.Second)
	return loop(ctx, cons, opts.Concurrency, opts.Grace, opts.Logger, func(ctx context.Context, m jetstream.Msg) {
		s.HandleDue(ctx, strings.TrimPrefix(m.Subject(), snats.ScheduleDuePrefix), msg{Msg: m})
	})
}

// ScheduleCommands carries out commands on serp.cmd.schedules.<op> from
// cons (the serpent-schedule-admin consumer), one at a time unless told
// otherwise, until ctx ends. A command that cannot be carried out is
// recorded in rec with its payload, like a refused schedule command.
func ScheduleCommands(ctx context.Context, eng *engine.Engine, s *engine.Schedules, rec engine.Rejections, cons jetstream.Consumer, opts Options) error {
	opts = opts.withDefaults(1, 10*time.Second)
	return loop(ctx, cons, opts.Concurrency, opts.Grace, opts.Logger, func(ctx context.Context, m jetstream.Msg) {
		eng.HandleScheduleCommand(ctx, s, rec, strings.TrimPrefix(m.Subject(), snats.ScheduleOpPrefix), msg{Msg: m})
	})
}
