package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
)

// The micro service: `nats micro ls` lists it as "serpent".
const (
	ServiceName    = "serpent"
	ServiceVersion = "0.2.0"
	// ServicePrefix is the subject group of its endpoints:
	// serpent.schedule, serpent.status, serpent.cancel, serpent.repurchase.
	ServicePrefix = "serpent"
)

// ServiceError is the JSON body of an error reply.
type ServiceError struct {
	Error  string                 `json:"error"`
	Reason string                 `json:"reason,omitempty"`
	Fields []aggregate.FieldError `json:"fields,omitempty"`
}

// JobRequest names a job for status, cancel and repurchase. A plain job id
// as the whole request body works too for status.
type JobRequest struct {
	JobID  string `json:"job_id"`
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Repurchases, for a repurchase, is how many re-purchases the job's
	// status showed when the decision was made. With it the request is
	// safe to repeat: a repeat after the job had its new one buys nothing
	// more. Without it every request authorises one more.
	Repurchases *int `json:"repurchases,omitempty"`
}

// Service offers the engine's operations request-reply on NATS: schedule a
// command (answers the job id), show a job's status, cancel a job,
// authorise a re-purchase. Errors carry the micro error headers and a JSON
// ServiceError body.
func (e *Engine) Service(ctx context.Context, nc *natsgo.Conn) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name: ServiceName, Version: ServiceVersion,
		Description: "serpent: schedule, inspect and steer paid SERP observations",
	})
	if err != nil {
		return nil, err
	}
	g := svc.AddGroup(ServicePrefix)
	endpoints := []struct {
		name, doc string
		h         func(context.Context, micro.Request)
	}{
		{"schedule", "a schedule command (JSON); answers the job id", e.serveSchedule},
		{"status", "a job id; answers the job's status", e.serveStatus},
		{"cancel", `{"job_id","by","reason"}; cancels a job that is not finished`, e.serveCancel},
		{"repurchase", `{"job_id","by","reason","repurchases"}; buys a charged_no_result job again, deliberately (repurchases: the count its status showed, to make a repeat safe)`, e.serveRepurchase},
	}
	for _, ep := range endpoints {
		if err := g.AddEndpoint(ep.name, micro.ContextHandler(ctx, ep.h),
			micro.WithEndpointMetadata(map[string]string{"description": ep.doc})); err != nil {
			_ = svc.Stop()
			return nil, err
		}
	}
	return svc, nil
}

func (e *Engine) serveSchedule(ctx context.Context, r micro.Request) {
	out, err := e.Schedule(ctx, r.Data(), "micro:"+ServicePrefix+".schedule")
	if err != nil {
		respondError(r, err)
		return
	}
	respond(r, out)
}

func (e *Engine) serveStatus(ctx context.Context, r micro.Request) {
	req, err := parseJobRequest(r.Data(), statusShape)
	if err != nil {
		respondError(r, err)
		return
	}
	s, err := e.State(ctx, req.JobID)
	if err != nil {
		respondError(r, err)
		return
	}
	if !s.Exists() {
		respondError(r, aggregate.ErrNoJob)
		return
	}
	respond(r, projections.ViewOf(s), micro.WithHeaders(micro.Headers{HeaderRepurchaseCount: {"1"}}))
}

func (e *Engine) serveCancel(ctx context.Context, r micro.Request) {
	e.serveOperator(ctx, r, cancelShape, func(ctx context.Context, req JobRequest) (aggregate.State, error) {
		return e.Cancel(ctx, req.JobID, req.By, req.Reason)
	})
}

func (e *Engine) serveRepurchase(ctx context.Context, r micro.Request) {
	e.serveOperator(ctx, r, repurchaseShape, func(ctx context.Context, req JobRequest) (aggregate.State, error) {
		return e.Repurchase(ctx, req.JobID, req.By, req.Reason, req.Repurchases)
	})
}

func (e *Engine) serveOperator(ctx context.Context, r micro.Request, shape *jsonShape, op func(context.Context, JobRequest) (aggregate.State, error)) {
	req, err := parseJobRequest(r.Data(), shape)
	if err != nil {
		respondError(r, err)
		return
	}
	if req.By == "" {
		req.By = "micro"
	}
	s, err := op(ctx, req)
	if err != nil {
		respondError(r, err)
		return
	}
	respond(r, projections.ViewOf(s))
}

var errBadRequest = errors.New("bad request")

// The fields each operation's request may have: a status request the
// job's id, a cancel its author and reason too, a re-purchase all of a
// JobRequest.
var (
	statusShape = shapeOf(reflect.TypeFor[struct {
		JobID string `json:"job_id"`
	}]())
	cancelShape = shapeOf(reflect.TypeFor[struct {
		JobID  string `json:"job_id"`
		By     string `json:"by"`
		Reason string `json:"reason"`
	}]())
	repurchaseShape = shapeOf(reflect.TypeFor[JobRequest]())
)

// parseJobRequest reads a job's id alone, or a JobRequest object of the
// given shape as strictly as commands are read: a field the shape does
// not have, or one named twice or in another case, would be ignored
// otherwise, and a misspelt "repurchases" would make a re-purchase
// unsafe to repeat.
func parseJobRequest(data []byte, shape *jsonShape) (JobRequest, error) {
	var req JobRequest
	trimmed := strings.TrimSpace(string(data))
	if strings.HasPrefix(trimmed, "{") {
		if err := decodeStrict(data, &req, shape); err != nil {
			return req, errors.Join(errBadRequest, err)
		}
	} else {
		req.JobID = trimmed
	}
	if req.JobID == "" {
		return req, errors.Join(errBadRequest, errors.New("a job id is required"))
	}
	if err := events.ValidateJobID(req.JobID); err != nil {
		return req, errors.Join(errBadRequest, err)
	}
	return req, nil
}

// respond answers with v; an answer that cannot be sent (larger than the
// server takes, say) is answered with a 500 that says so, rather than left
// for the caller to time out on.
func respond(r micro.Request, v any, opts ...micro.RespondOpt) {
	if err := r.RespondJSON(v, opts...); err != nil {
		respondError(r, fmt.Errorf("the answer could not be sent: %w", err))
	}
}

// HeaderRepurchaseCount marks the answers of an engine that honours the
// "repurchases" count of a repurchase request (an earlier one ignores
// it): a client may then repeat such a request safely.
const HeaderRepurchaseCount = "Serpent-Repurchase-Count"

// respondError answers with a status code the caller can act on.
func respondError(r micro.Request, err error) {
	body := ServiceError{Error: err.Error()}
	code := "500"
	var rej *RejectError
	var se *ScheduleError
	switch {
	case errors.As(err, &rej):
		code, body.Reason, body.Fields = "400", rej.Reason, rej.Fields
	case errors.As(err, &se):
		code, body.Reason = "400", se.Reason
	case errors.Is(err, ErrScheduleExists):
		code, body.Reason = "409", "schedule_exists"
	case errors.Is(err, ErrNoSchedule):
		code, body.Reason = "404", "no_such_schedule"
	case errors.Is(err, errBadRequest), errors.Is(err, aggregate.ErrInvalidInput):
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

// AddScheduleEndpoints offers recurring schedules on the service:
// serpent.schedules.create (a definition), .list, .get, .pause, .resume and
// .delete (an id).
func AddScheduleEndpoints(ctx context.Context, svc micro.Service, s *Schedules) error {
	g := svc.AddGroup(ServicePrefix + ".schedules")
	for _, op := range []struct{ name, doc string }{
		{"create", "a schedule definition (JSON); answers the stored schedule"},
		{"list", `answers the schedules by id: every one, or a page with {"after":"<id>","limit":<n>}`},
		{"get", "a schedule id; answers its definition, state and recent slots"},
		{"pause", "a schedule id; stops it firing (slots that come while paused are skipped)"},
		{"resume", "a schedule id; catches up slots due before the pause, as after a downtime, and fires again from its next slot"},
		{"delete", "a schedule id; removes it (its jobs stay)"},
	} {
		h := func(ctx context.Context, r micro.Request) {
			out, err := s.ScheduleOp(ctx, op.name, r.Data())
			if err != nil {
				respondError(r, err)
				return
			}
			respond(r, out)
		}
		if err := g.AddEndpoint(op.name, micro.ContextHandler(ctx, h),
			micro.WithEndpointMetadata(map[string]string{"description": op.doc})); err != nil {
			return err
		}
	}
	return nil
}
