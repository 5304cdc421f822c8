package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

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

// ErrBadRequest: a request on a job that does not say which job, or says
// more than its operation takes. Correct the request; repeating it does
// the same.
var ErrBadRequest = errors.New("bad request")

// The fields each operation's request may have: a status request the
// job's id, a cancel its author and reason too, a re-purchase all of a
// JobRequest.
var jobShapes = map[string]*jsonShape{
	"status": shapeOf(reflect.TypeFor[struct {
		JobID string `json:"job_id"`
	}]()),
	"cancel": shapeOf(reflect.TypeFor[struct {
		JobID  string `json:"job_id"`
		By     string `json:"by"`
		Reason string `json:"reason"`
	}]()),
	"repurchase": shapeOf(reflect.TypeFor[JobRequest]()),
}

// JobOp carries out one operation on a job and returns the job's state
// after it: status (a job id, alone or as {"job_id"}), cancel
// ({"job_id","by","reason"}) or repurchase (a JobRequest). A request
// names who asks in "by"; by is taken when it does not. Requests are read
// as strictly as commands: a field the operation does not take, or one
// named twice or in another case, would be ignored otherwise, and a
// misspelt "repurchases" would make a re-purchase unsafe to repeat.
func (e *Engine) JobOp(ctx context.Context, op string, payload []byte, by string) (aggregate.State, error) {
	shape, ok := jobShapes[op]
	if !ok {
		return aggregate.State{}, fmt.Errorf("%w: unknown operation %q on a job (status, cancel, repurchase)", ErrBadRequest, op)
	}
	req, err := parseJobRequest(payload, shape)
	if err != nil {
		return aggregate.State{}, err
	}
	if req.By == "" {
		req.By = by
	}
	switch op {
	case "cancel":
		return e.Cancel(ctx, req.JobID, req.By, req.Reason)
	case "repurchase":
		return e.Repurchase(ctx, req.JobID, req.By, req.Reason, req.Repurchases)
	}
	s, err := e.State(ctx, req.JobID)
	if err == nil && !s.Exists() {
		err = aggregate.ErrNoJob
	}
	return s, err
}

// parseJobRequest reads a job's id alone, or a JobRequest object of the
// given shape.
func parseJobRequest(data []byte, shape *jsonShape) (JobRequest, error) {
	var req JobRequest
	trimmed := strings.TrimSpace(string(data))
	if strings.HasPrefix(trimmed, "{") {
		if err := decodeStrict(data, &req, shape); err != nil {
			return req, errors.Join(ErrBadRequest, err)
		}
	} else {
		req.JobID = trimmed
	}
	if req.JobID == "" {
		return req, errors.Join(ErrBadRequest, errors.New("a job id is required"))
	}
	if err := events.ValidateJobID(req.JobID); err != nil {
		return req, errors.Join(ErrBadRequest, err)
	}
	if !aggregate.IsJobID(req.JobID) {
		return req, fmt.Errorf("%w: %q is not a job id: a job id is 32 lowercase hex characters, as scheduling answers it", ErrBadRequest, req.JobID)
	}
	return req, nil
}
