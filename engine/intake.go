package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"
	"unicode/utf8"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/eventstore"
)

// MaxCommandBytes bounds a schedule command. A query is at most 2 KiB, so a
// valid command is far smaller; anything larger is refused unread.
const MaxCommandBytes = 16 << 10

// Rejection reasons that are not about one field.
const (
	ReasonMalformed = "malformed"
	ReasonTooLarge  = "too_large"
	// ReasonUnknownSubject refuses a command on a serp.cmd subject that
	// serpent does not read (only serp.cmd.schedule and
	// serp.cmd.schedules.<op> for the operations on schedules are
	// commands).
	ReasonUnknownSubject = "unknown_subject"
	// ReasonInvalidAccount refuses a command naming an API account this
	// engine was not given: the one reason that depends on the engine's
	// configuration, not on the command (serpent audit accepts it for a
	// command otherwise valid).
	ReasonInvalidAccount = "invalid_account"
	// ReasonSlotExpired refuses a command whose slot is older than the
	// live log's horizon less the skew margin: its job may have left the
	// live log, and a new one would buy the observation again.
	ReasonSlotExpired = "slot_expired"
	// ReasonBeforeFirstSlot refuses a command whose slot is before the
	// deployment's first slot (Config.FirstSlot): another deployment
	// runs those slots, and a job here would buy them again.
	ReasonBeforeFirstSlot = "before_first_slot"
)

// RejectError says why a command cannot become a job. Reason is the token of
// the rejection subject serp.rejected.<reason>.
type RejectError struct {
	Reason string                 `json:"reason"`
	Msg    string                 `json:"error"`
	Fields []aggregate.FieldError `json:"fields,omitempty"`
}

func (e *RejectError) Error() string { return e.Msg }

// ParseCommand reads and validates one schedule command strictly: unknown
// fields, fields named twice or in another case, trailing data and
// oversized payloads are rejected too.
func ParseCommand(data []byte) (aggregate.ScheduleCommand, error) {
	c, err := decodeCommand(data)
	if err != nil {
		return c, err
	}
	if serr := commandShape.check(data); serr != nil {
		return c, &RejectError{Reason: ReasonMalformed, Msg: "command " + serr.Error()}
	}
	return c, nil
}

// decodeCommand reads a command strictly but for the shape of its fields.
func decodeCommand(data []byte) (aggregate.ScheduleCommand, error) {
	var c aggregate.ScheduleCommand
	if len(data) > MaxCommandBytes {
		return c, &RejectError{Reason: ReasonTooLarge,
			Msg: fmt.Sprintf("command is %d bytes, the limit is %d", len(data), MaxCommandBytes)}
	}
	if !utf8.Valid(data) {
		// The decoder would replace the bad bytes, and buy another search.
		return c, &RejectError{Reason: ReasonMalformed, Msg: "command is not valid UTF-8"}
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		// The decoder takes null for an empty command.
		return c, &RejectError{Reason: ReasonMalformed, Msg: "command is null, not a JSON schedule command"}
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&c); err != nil {
		return c, &RejectError{Reason: ReasonMalformed, Msg: "command is not a JSON schedule command: " + err.Error()}
	}
	if len(bytes.TrimSpace(data[d.InputOffset():])) > 0 {
		return c, &RejectError{Reason: ReasonMalformed, Msg: "command has data after its JSON object"}
	}
	return c, nil
}

// commandShape is the fields of a schedule command.
var commandShape = shapeOf(reflect.TypeFor[aggregate.ScheduleCommand]())

// Scheduled is the answer to a schedule command.
type Scheduled struct {
	JobID string `json:"job_id"`
	// Created is false when the observation was scheduled before: the same
	// slot and search context is always the same job.
	Created   bool             `json:"created"`
	Status    aggregate.Status `json:"status"`
	NotBefore time.Time        `json:"not_before"`
}

// Schedule turns a command into a job, or into a *RejectError, and arms
// the job's timer. It is idempotent: the job id comes from the slot and the
// canonical search context, and the job's first events are appended only if
// it has none, so the same command any number of times is one job. The
// timer is armed whether the job is new or not, so a command redelivered
// after a crash also repairs a timer that was never armed.
func (e *Engine) Schedule(ctx context.Context, data []byte, source string) (Scheduled, error) {
	out, k, err := e.schedule(ctx, data, source, false)
	if err != nil {
		return out, err
	}
	if !k.ok {
		if k.s, err = e.State(ctx, out.JobID); err != nil {
			return Scheduled{}, err
		}
	}
	if next := k.s.Next(e.cfg.Now()); next.Step != aggregate.StepDone {
		if err := e.cfg.Timers.Arm(ctx, out.JobID, next.At); err != nil {
			return Scheduled{}, fmt.Errorf("schedule job %s: arm timer: %w", out.JobID, err)
		}
	}
	return out, nil
}

// schedule appends a new job's first events. It returns the job's state
// when it knows it (a job it just created), for the caller to go on from.
// With defer_, nothing is stored: the job's first events come back as
// pending, for the caller to store with the job's first claim.
func (e *Engine) schedule(ctx context.Context, data []byte, source string, defer_ bool) (Scheduled, known, error) {
	cmd, err := ParseCommand(data)
	if err != nil {
		return Scheduled{}, known{}, err
	}
	sched, err := aggregate.NewSchedule(cmd, e.cfg.Policy, source)
	var ve *aggregate.ValidationError
	if errors.As(err, &ve) {
		return Scheduled{}, known{}, &RejectError{Reason: ve.Reason(), Msg: ve.Error(), Fields: ve.Fields}
	}
	if err != nil {
		return Scheduled{}, known{}, &RejectError{Reason: ReasonMalformed, Msg: err.Error()}
	}
	if rej, refused := e.refusedSlot(sched.Slot); refused {
		// A repeat of a command whose job is still live is that job, as
		// before the horizon; only a slot without a live job is refused.
		s, err := e.State(ctx, sched.JobID)
		if err != nil {
			return Scheduled{}, known{}, err
		}
		if s.Exists() {
			return Scheduled{JobID: sched.JobID, Status: s.Status, NotBefore: s.NextRunAt}, known{}, nil
		}
		return Scheduled{}, known{}, rej
	}
	if _, err := e.api(sched.Account); err != nil {
		return Scheduled{}, known{}, &RejectError{Reason: ReasonInvalidAccount, Msg: err.Error(),
			Fields: []aggregate.FieldError{{Field: "account", Message: fmt.Sprintf("%q is not an account of this engine", sched.Account)}}}
	}
	evs, err := e.decider.Decide(aggregate.State{}, sched, e.cfg.Now(), e.cfg.IDs)
	if errors.Is(err, aggregate.ErrInvalidInput) {
		// A command the checks above let through but the aggregate
		// refuses would come again for ever: it is a rejection.
		return Scheduled{}, known{}, &RejectError{Reason: ReasonMalformed, Msg: err.Error()}
	}
	if err != nil {
		return Scheduled{}, known{}, fmt.Errorf("schedule job %s: %w", sched.JobID, err)
	}
	out := Scheduled{JobID: sched.JobID, Created: true, Status: aggregate.StatusScheduled, NotBefore: sched.NotBefore}
	if defer_ {
		// The caller goes on with the job at once: its first events are
		// stored then, with its first claim if it is due.
		return out, known{s: aggregate.Fold(evs), ok: true, pending: evs}, nil
	}
	ver, err := e.cfg.Store.Append(expiring(ctx, aggregate.Fold(evs)), sched.JobID, 0, evs...)
	switch {
	case errors.Is(err, eventstore.ErrConcurrency):
		s, err := e.State(ctx, sched.JobID)
		if err != nil {
			return Scheduled{}, known{}, err
		}
		out.Created, out.Status, out.NotBefore = false, s.Status, s.NextRunAt
		return out, known{}, nil
	case err != nil:
		return Scheduled{}, known{}, fmt.Errorf("schedule job %s: %w", sched.JobID, err)
	}
	if err := e.hook(e.cfg.Hooks.AfterSchedule, sched.JobID); err != nil {
		return Scheduled{}, known{}, err
	}
	return out, after(aggregate.State{}, ver, evs), nil
}

// State loads and folds one job.
func (e *Engine) State(ctx context.Context, jobID string) (aggregate.State, error) {
	evs, _, err := e.cfg.Store.Load(ctx, jobID)
	if err != nil {
		return aggregate.State{}, fmt.Errorf("load job %s: %w", jobID, err)
	}
	return aggregate.Fold(evs), nil
}
