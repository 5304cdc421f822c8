package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
)

// ErrorBody is the JSON body of an error reply.
type ErrorBody struct {
	Error  string                 `json:"error"`
	Reason string                 `json:"reason,omitempty"`
	Fields []aggregate.FieldError `json:"fields,omitempty"`
}

// respond answers with v; an answer that cannot be sent (larger than the
// server takes, say) is answered with a 500 that says so, rather than left
// for the caller to time out on.
func respond(r micro.Request, v any, opts ...micro.RespondOpt) {
	if err := r.RespondJSON(v, opts...); err != nil {
		respondError(r, fmt.Errorf("the answer could not be sent: %w", err))
	}
}

// respondError answers with a status code the caller can act on.
func respondError(r micro.Request, err error) {
	msg := callerMessage(err)
	body := ErrorBody{Error: msg}
	code := "500"
	var rej *engine.RejectError
	var se *engine.ScheduleError
	switch {
	case errors.As(err, &rej):
		code, body.Reason, body.Fields = "400", rej.Reason, rej.Fields
	case errors.As(err, &se):
		code, body.Reason = "400", se.Reason
	case errors.Is(err, engine.ErrScheduleExists):
		code, body.Reason = "409", "schedule_exists"
	case errors.Is(err, engine.ErrNoSchedule):
		code, body.Reason = "404", "no_such_schedule"
	case errors.Is(err, engine.ErrBadRequest), errors.Is(err, aggregate.ErrInvalidInput):
		code = "400"
	case errors.Is(err, aggregate.ErrNoJob):
		code = "404"
	case errors.Is(err, aggregate.ErrTerminal), errors.Is(err, aggregate.ErrLeased), errors.Is(err, aggregate.ErrNotAllowed):
		code = "409"
	}
	data, _ := json.Marshal(body)
	_ = r.Error(code, firstLine(msg), data)
}

// callerMessage says what went wrong in the caller's words: what is true
// of the job, and what to do, without the engine's package names.
func callerMessage(err error) string {
	var leased *aggregate.LeasedError
	switch {
	case errors.As(err, &leased):
		return fmt.Sprintf("a search of this job is in flight (worker %s holds it until %s): try again after that",
			leased.Worker, leased.Until.UTC().Format(time.RFC3339))
	case errors.Is(err, aggregate.ErrNoJob):
		return "no such job: nothing was scheduled with this job id"
	case errors.Is(err, aggregate.ErrTerminal):
		return "the job is finished: nothing can change it now"
	case errors.Is(err, aggregate.ErrNotAllowed):
		detail := strings.TrimPrefix(strings.TrimPrefix(err.Error(), aggregate.ErrNotAllowed.Error()), ": ")
		if detail == "" {
			detail = "the job's state does not allow it"
		}
		return "not allowed: " + detail
	case errors.Is(err, aggregate.ErrInvalidInput):
		return strings.TrimPrefix(err.Error(), "aggregate: ")
	}
	return err.Error()
}

func firstLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}
