// Package service offers the engine's operations request-reply as a NATS
// micro service: `nats micro ls` lists it as "serpent". Schedule a command
// (serpent.schedule), show a job's status (serpent.status), cancel a job
// (serpent.cancel), authorise a re-purchase (serpent.repurchase), and
// keep recurring schedules (serpent.schedules.<op>). Errors carry the
// micro error headers and a JSON ErrorBody.
package service

import (
	"context"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/projections"
)

// The service's name, version and the subject group of its endpoints.
const (
	Name    = "serpent"
	Version = "0.2.0"
	Prefix  = "serpent"
)

// HeaderRepurchaseCount marks the status answers of an engine that
// honours the "repurchases" count of a repurchase request: a client may
// then repeat such a request safely.
const HeaderRepurchaseCount = "Serpent-Repurchase-Count"

// Start adds the service to nc, its handlers running eng's operations
// with ctx, and the endpoints of recurring schedules when schedules is
// not nil. Stop the service it returns to take it away.
func Start(ctx context.Context, nc *natsgo.Conn, eng *engine.Engine, schedules *engine.Schedules) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name: Name, Version: Version,
		Description: "serpent: schedule, inspect and steer paid SERP observations",
	})
	if err != nil {
		return nil, err
	}
	if err := addJobEndpoints(ctx, svc, eng); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	if schedules != nil {
		if err := addScheduleEndpoints(ctx, svc, schedules); err != nil {
			_ = svc.Stop()
			return nil, err
		}
	}
	return svc, nil
}

// addJobEndpoints offers serpent.schedule, .status, .cancel and
// .repurchase.
func addJobEndpoints(ctx context.Context, svc micro.Service, eng *engine.Engine) error {
	g := svc.AddGroup(Prefix)
	schedule := func(ctx context.Context, r micro.Request) {
		out, err := eng.Schedule(ctx, r.Data(), "micro:"+Prefix+".schedule")
		if err != nil {
			respondError(r, err)
			return
		}
		respond(r, out)
	}
	if err := g.AddEndpoint("schedule", micro.ContextHandler(ctx, schedule),
		micro.WithEndpointMetadata(map[string]string{"description": "a schedule command (JSON); answers the job id"})); err != nil {
		return err
	}
	for _, ep := range []struct{ name, doc string }{
		{"status", "a job id; answers the job's status"},
		{"cancel", `{"job_id","by","reason"}; cancels a job that is not finished`},
		{"repurchase", `{"job_id","by","reason","repurchases"}; buys a charged_no_result job again, deliberately (repurchases: the count its status showed, to make a repeat safe)`},
	} {
		h := func(ctx context.Context, r micro.Request) {
			s, err := eng.JobOp(ctx, ep.name, r.Data(), "micro")
			if err != nil {
				respondError(r, err)
				return
			}
			var opts []micro.RespondOpt
			if ep.name == "status" {
				opts = append(opts, micro.WithHeaders(micro.Headers{HeaderRepurchaseCount: {"1"}}))
			}
			respond(r, projections.ViewOf(s), opts...)
		}
		if err := g.AddEndpoint(ep.name, micro.ContextHandler(ctx, h),
			micro.WithEndpointMetadata(map[string]string{"description": ep.doc})); err != nil {
			return err
		}
	}
	return nil
}

// addScheduleEndpoints offers recurring schedules:
// serpent.schedules.create (a definition), .list, .get, .pause, .resume
// and .delete (an id).
func addScheduleEndpoints(ctx context.Context, svc micro.Service, s *engine.Schedules) error {
	g := svc.AddGroup(Prefix + ".schedules")
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
