package cli

import (
	"log/slog"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/httpops"
	"github.com/serpent-engine/serpent/metrics"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// opsServer is what the HTTP server of "serpent run" shows (httpops):
// the status page, the metrics, liveness and readiness.
type opsServer struct {
	nc     *natsgo.Conn
	js     jetstream.JetStream
	worker string
	// sandbox is the address of the sandbox the engine talks to, if any.
	sandbox string
	// projections is set when this process keeps the projection buckets;
	// readiness then includes their lag.
	projections bool
	ops         opsFlags
	metrics     *metrics.Metrics
	tally       *projections.Tally
	log         *slog.Logger
	// now is the engine's clock (the server's, as the limiter reads it);
	// nil for the machine's.
	now func() time.Time
	// limiter is the engine's, whose refused limits readiness reports.
	limiter *engine.Limiter
	// runner is the engine's projection runner (nil for none), whose
	// catch-up readiness reports.
	runner *projector.Runner
}

// server is the HTTP server of o.
func (o *opsServer) server() *httpops.Server {
	// The engine's own buckets: schedules, and the accounts' limits, which
	// every search takes a slot, a token or a budget from.
	buckets := []string{snats.SchedulesBucket, snats.AccountsBucket}
	if o.projections {
		buckets = append(buckets, projections.Buckets()...)
		buckets = append(buckets, projector.ControlBucket)
	}
	return httpops.New(httpops.Config{Source: opsSource{nc: o.nc, js: o.js, runner: o.runner}, Tally: o.tally, Metrics: o.metrics.Handler(),
		Worker: o.worker, Version: version, Sandbox: o.sandbox,
		Streams: []string{snats.EventStream, snats.ArchiveStream, snats.CommandStream, snats.RejectStream, snats.WorkStream}, Buckets: buckets,
		Projections: o.projections, ReadyMaxLag: o.ops.readyMaxLag, ReadyMaxBehind: o.ops.readyMaxBehind,
		Refusals: refusals(o.limiter), Now: o.now, Logger: o.log})
}
