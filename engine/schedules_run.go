package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/recurring"
)

// HandleDue fires a schedule for one delivery of its wake-up, and
// settles the delivery: acknowledged once the slots due are ordered and
// the next one's timer armed, asked again a second later if that failed.
func (s *Schedules) HandleDue(ctx context.Context, id string, msg Msg) {
	var woke time.Time
	if info, err := msg.Info(); err == nil {
		woke = info.Stored
	}
	if _, err := s.fire(ctx, id, woke); err != nil {
		s.log.Warn("firing a schedule failed; it will be tried again", "schedule", id, "err", err)
		_ = msg.NakWithDelay(time.Second)
		return
	}
	_ = msg.Ack()
}

// ListRequest pages through the schedules: those whose id comes after
// After, at most Limit (0: all; a list too big for one NATS message is
// refused, so page a long one).
type ListRequest struct {
	After string `json:"after,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

// ScheduleRequest names a schedule for pause, resume, delete and get; a
// plain id as the whole payload works too.
type ScheduleRequest struct {
	ID string `json:"id"`
}

// The shapes of the payloads of schedule operations.
var (
	definitionShape = shapeOf(reflect.TypeFor[recurring.Definition]())
	listShape       = shapeOf(reflect.TypeFor[ListRequest]())
	requestShape    = shapeOf(reflect.TypeFor[ScheduleRequest]())
)

// scheduleOps are the operations on schedules: the endpoints
// serpent.schedules.<op> and the command subjects serp.cmd.schedules.<op>.
var scheduleOps = []string{"create", "list", "get", "pause", "resume", "delete"}

// ScheduleOp carries out one operation on schedules: create (payload: a
// definition), list (a page, or nothing) or pause, resume, delete, get
// (payload: an id, alone or as {"id":"<id>"}). An operation not in
// scheduleOps is refused as unknown_subject, whatever its payload.
// Payloads are read strictly, as commands are: unknown fields, a field
// named twice or in another case, and data after the object are
// malformed.
func (s *Schedules) ScheduleOp(ctx context.Context, op string, payload []byte) (any, error) {
	switch op {
	case "create":
		var d recurring.Definition
		if err := decodeStrict(payload, &d, definitionShape); err != nil {
			return nil, &ScheduleError{Reason: ReasonMalformed, Err: fmt.Errorf("a schedule definition is JSON with the fields %s: %w", strings.Join(definitionShape.keys, ", "), err)}
		}
		return s.Create(ctx, d)
	case "list":
		var r ListRequest
		if len(bytes.TrimSpace(payload)) > 0 {
			if err := decodeStrict(payload, &r, listShape); err != nil || r.Limit < 0 {
				return nil, &ScheduleError{Reason: ReasonMalformed, Err: errors.New(`a list request is empty or {"after":"<id>","limit":<n>}`)}
			}
		}
		return s.ListPage(ctx, r.After, r.Limit)
	case "get", "pause", "resume", "delete":
	default:
		return nil, &ScheduleError{Reason: ReasonUnknownSubject, Err: fmt.Errorf("unknown schedule operation %q: the operations are %s",
			op, strings.Join(scheduleOps, ", "))}
	}
	id := strings.TrimSpace(string(payload))
	if strings.HasPrefix(id, "{") {
		var r ScheduleRequest
		if err := decodeStrict(payload, &r, requestShape); err != nil {
			return nil, &ScheduleError{Reason: ReasonMalformed, Err: fmt.Errorf(`a schedule id is sent alone or as {"id":"<id>"}: %w`, err)}
		}
		id = r.ID
	}
	if id == "" {
		return nil, &ScheduleError{Reason: ReasonMalformed, Err: errors.New("a schedule id is required")}
	}
	if err := events.ValidateJobID(id); err != nil {
		return nil, &ScheduleError{Reason: ReasonMalformed, Err: fmt.Errorf("schedule id: %s", strings.Replace(err.Error(), "job id", "id", 1))}
	}
	switch op {
	case "pause":
		return s.Pause(ctx, id)
	case "resume":
		return s.Resume(ctx, id)
	case "delete":
		return map[string]string{"deleted": id}, s.Delete(ctx, id)
	}
	rec, _, err := s.Get(ctx, id)
	return rec, err
}

// scheduleReason is the rejection token of a failed schedule operation.
func scheduleReason(err error) string {
	var se *ScheduleError
	switch {
	case errors.As(err, &se):
		return se.Reason
	case errors.Is(err, ErrScheduleExists):
		return "schedule_exists"
	case errors.Is(err, ErrNoSchedule):
		return "no_such_schedule"
	}
	return ""
}

// HandleScheduleCommand carries out one delivery of a command on
// schedules, operation op with the delivery's payload. A command that
// cannot be carried out is recorded with rec, like a refused schedule
// command; one that failed for a passing reason is asked again a second
// later.
func (e *Engine) HandleScheduleCommand(ctx context.Context, s *Schedules, rec Rejections, op string, msg Msg) {
	_, err := s.ScheduleOp(ctx, op, msg.Data())
	reason := scheduleReason(err)
	switch {
	case err == nil:
		_ = msg.Ack()
	case reason == "":
		e.log.Warn("a schedule command failed; it will be tried again", "op", op, "err", err)
		_ = msg.NakWithDelay(time.Second)
	case op == "delete" && errors.Is(err, ErrNoSchedule) && delivered(msg) > 1:
		// Delivered again (its acknowledgement was lost, or recording it
		// failed): the schedule is gone, as asked.
		e.log.Info("schedule delete delivered again; the schedule is gone, as asked", "err", err)
		_ = msg.Ack()
	default:
		e.Refuse(ctx, rec, msg, &RejectError{Reason: reason, Msg: err.Error()})
	}
}

// delivered is how often a delivery's message came, this time included;
// 0 if unknown.
func delivered(msg Msg) uint64 {
	info, err := msg.Info()
	if err != nil {
		return 0
	}
	return info.Delivered
}
