package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	snats "github.com/serpent-engine/serpent/nats"
)

// RunStrays reads every command subject from cons (the serpent-strays
// consumer) until ctx ends and records a command on a subject nothing
// reads (serp.cmd.schedul, serp.cmd.schedule.v2: only serp.cmd.schedule
// and serp.cmd.schedules.<op> are commands) as refused, reason
// unknown_subject, once; the commands the intake and the schedule-admin
// consumer read are acknowledged and left to them.
func (e *Engine) RunStrays(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer) error {
	return e.consume(ctx, cons, 4, 5*time.Second, func(ctx context.Context, msg jetstream.Msg) {
		e.HandleStray(ctx, js, msg)
	})
}

// IsCommandSubject says whether serpent reads commands on subject.
func IsCommandSubject(subject string) bool {
	return subject == snats.ScheduleSubject || strings.HasPrefix(subject, snats.ScheduleOpPrefix)
}

// HandleStray settles one delivery of the serpent-strays consumer: a
// command on a subject serpent reads is acknowledged and left to its own
// consumer; any other is recorded in rec as refused (unknown_subject),
// then acknowledged.
func (e *Engine) HandleStray(ctx context.Context, rec Rejections, msg jetstream.Msg) {
	subj := msg.Subject()
	if IsCommandSubject(subj) {
		_ = msg.Ack()
		return
	}
	meta, err := msg.Metadata()
	if err != nil {
		_ = msg.Term()
		return
	}
	rej := &RejectError{Reason: ReasonUnknownSubject, Msg: fmt.Sprintf(
		"nothing reads %s: schedule commands go on %s, schedule operations on %s<op>", subj, snats.ScheduleSubject, snats.ScheduleOpPrefix)}
	if err := e.reject(ctx, rec, msg, meta.Sequence.Stream, rej); err != nil {
		e.log.Warn("recording a rejection failed; the command will be tried again", "seq", meta.Sequence.Stream, "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	e.log.Info("command rejected", "seq", meta.Sequence.Stream, "subject", subj, "reason", rej.Reason)
	_ = msg.Ack()
}
