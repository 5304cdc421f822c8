package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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
	body := ErrorBody{Error: err.Error()}
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
	_ = r.Error(code, firstLine(err.Error()), data)
}

func firstLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}
