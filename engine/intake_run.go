package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/aggregate"
	snats "github.com/serpent-engine/serpent/nats"
)

// Headers of a rejection record on serp.rejected.<reason>. The message body
// is the command's payload, byte for byte (its first bytes only, with its
// size and digest in headers, if the record would otherwise outgrow a
// message).
const (
	HeaderRejectReason = "Serpent-Reject-Reason"
	HeaderRejectError  = "Serpent-Reject-Error"
	HeaderRejectFields = "Serpent-Reject-Fields"
	// HeaderRejectFieldsOmitted counts the field errors left out of
	// Serpent-Reject-Fields to keep it within its 2 KB.
	HeaderRejectFieldsOmitted = "Serpent-Reject-Fields-Omitted"
	HeaderCommandSubject      = "Serpent-Command-Subject"
	HeaderCommandSeq          = "Serpent-Command-Seq"
	// HeaderCommandBytes and HeaderCommandSHA256 describe the whole
	// command when the record keeps only its first bytes (a command too
	// large for a record with headers of its own).
	HeaderCommandBytes  = "Serpent-Command-Bytes"
	HeaderCommandSHA256 = "Serpent-Command-Sha256"
)

// RunIntake takes schedule commands from a JetStream consumer until ctx
// ends, concurrency at a time. Each command becomes a job or a rejection record, and is
// acknowledged only after that is durable; a command whose handling failed
// is delivered again. Rejection records are published with js.
func (e *Engine) RunIntake(ctx context.Context, js jetstream.JetStream, cons jetstream.Consumer, concurrency int) error {
	if concurrency <= 0 {
		concurrency = 16
	}
	return e.consume(ctx, cons, concurrency, 10*time.Second, func(ctx context.Context, msg jetstream.Msg) {
		e.HandleCommand(ctx, js, msg)
	})
}

// HandleCommand handles one delivery of the intake, a schedule command on
// serp.cmd.schedule: it becomes a job, taken as far as it goes now (its
// timer armed if it must wait) while the command is held, or a rejection
// record published with rec. A command on another subject is acknowledged
// and left alone: its own consumer, or the serpent-strays one
// (HandleStray), has it. The command is
// acknowledged once that is durable, asked again a second later if it
// failed, and left alone when a test hook played a crash. RunIntake calls
// it for every delivery; the simulation (package sim) calls it with its own
// messages and rejection records, so both run this code.
func (e *Engine) HandleCommand(ctx context.Context, rec Rejections, msg jetstream.Msg) {
	meta, err := msg.Metadata()
	if err != nil {
		e.log.Warn("command without JetStream metadata", "err", err)
		_ = msg.Term()
		return
	}
	source := fmt.Sprintf("%s:%d", meta.Stream, meta.Sequence.Stream)
	var (
		out Scheduled
		k   known
	)
	switch subj := msg.Subject(); {
	case subj == snats.ScheduleSubject:
		out, k, err = e.schedule(ctx, msg.Data(), source, true)
	default:
		// Not the intake's (its consumer reads serp.cmd.schedule alone):
		// the serpent-strays consumer records what nothing reads.
		_ = msg.Ack()
		return
	}
	if err == nil {
		// Take the job as far as it goes now, holding the command: if this
		// process dies, the command comes back and the job with it.
		err = e.settle(ctx, out.JobID, k, func() { _ = msg.InProgress() }, nil, time.Time{})
	}
	var rej *RejectError
	switch {
	case errors.Is(err, ErrCrash):
		return // a test plays a crash: leave the command unacknowledged
	case errors.As(err, &rej):
		if err := e.reject(ctx, rec, msg, meta.Sequence.Stream, rej); err != nil {
			e.log.Warn("recording a rejection failed; the command will be tried again", "seq", meta.Sequence.Stream, "err", err)
			_ = msg.NakWithDelay(time.Second)
			return
		}
		e.log.Info("command rejected", "seq", meta.Sequence.Stream, "reason", rej.Reason, "err", rej.Msg)
	case err != nil:
		e.log.Warn("scheduling failed; the command will be tried again", "seq", meta.Sequence.Stream, "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	default:
		e.log.Debug("command scheduled", "seq", meta.Sequence.Stream, "job", out.JobID, "created", out.Created)
	}
	_ = msg.Ack()
}

// settle steps a job and arms its timer if it must wait. hold, if not
// nil, is offered a wait its account imposes (a pause, a limit) first: when
// it takes the wait, no timer is armed. woke is the server's time when the
// timer that woke the job fired (zero when no timer did).
func (e *Engine) settle(ctx context.Context, jobID string, k known, keepAlive func(), hold func(time.Duration) bool, woke time.Time) error {
	next, throttled, err := e.step(ctx, jobID, k, keepAlive)
	if err != nil {
		return err
	}
	if next.Step != aggregate.StepWait {
		return nil
	}
	// skew is how far the server's clock, which fires timers, is ahead of
	// this engine's at least: it stored the wake-up at woke. A timer armed
	// for next.At would fire that much early, at once if the server is
	// past it already, and again until this clock got there.
	at, now := next.At, e.cfg.Now()
	skew := max(woke.Sub(now), 0)
	if hold != nil && (throttled || skew > 0 && !at.After(woke)) && hold(at.Sub(now)) {
		return nil
	}
	at = at.Add(skew)
	if err := e.cfg.Timers.Arm(ctx, jobID, at); err != nil {
		return fmt.Errorf("job %s: arm timer: %w", jobID, err)
	}
	return nil
}

// reject records a refused command on serp.rejected.<reason>, once per
// command (the message id is the command's sequence).
func (e *Engine) reject(ctx context.Context, rec Rejections, msg jetstream.Msg, seq uint64, rej *RejectError) error {
	m := natsgo.NewMsg(snats.RejectSubjectPrefix + rej.Reason)
	m.Data = msg.Data()
	if limit := int(maxPayload(rec)) - rejectHeadroom; len(m.Data) > limit {
		// The command fitted; the record, with its headers, would not.
		sum := sha256.Sum256(m.Data)
		m.Header.Set(HeaderCommandBytes, strconv.Itoa(len(m.Data)))
		m.Header.Set(HeaderCommandSHA256, hex.EncodeToString(sum[:]))
		m.Data = m.Data[:max(limit, 0)]
	}
	m.Header.Set(HeaderRejectReason, rej.Reason)
	m.Header.Set(HeaderRejectError, truncate(rej.Msg, 1024))
	if len(rej.Fields) > 0 {
		fields, omitted := fieldsHeader(rej.Fields, 2048)
		m.Header.Set(HeaderRejectFields, fields)
		if omitted > 0 {
			m.Header.Set(HeaderRejectFieldsOmitted, strconv.Itoa(omitted))
		}
	}
	m.Header.Set(HeaderCommandSubject, msg.Subject())
	m.Header.Set(HeaderCommandSeq, strconv.FormatUint(seq, 10))
	m.Header.Set(natsgo.MsgIdHdr, "rejected-"+strconv.FormatUint(seq, 10))
	_, err := rec.PublishMsg(ctx, m)
	return err
}

// fieldsHeader is the JSON array of a rejection's field errors in at most
// limit bytes: whole fields, as many as fit (each message cut to 256
// bytes), and how many were left out. It is always valid JSON.
func fieldsHeader(fields []aggregate.FieldError, limit int) (string, int) {
	out := "[]"
	for i := range fields {
		kept := make([]aggregate.FieldError, i+1)
		copy(kept, fields[:i+1])
		for j := range kept {
			kept[j].Field, kept[j].Message = truncate(kept[j].Field, 64), truncate(kept[j].Message, 256)
		}
		b, err := json.Marshal(kept)
		if err != nil || len(b) > limit {
			return out, len(fields) - i
		}
		out = string(b)
	}
	return out, 0
}

// rejectHeadroom is what a rejection record keeps free of its command's
// bytes for its headers (the error and the fields are truncated to fit).
const rejectHeadroom = 8 << 10

// truncate makes s fit a header value: one line, at most n bytes.
func truncate(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
