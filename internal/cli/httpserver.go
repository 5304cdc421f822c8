package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/metrics"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
)

// opsServer is what the HTTP server of "serpent run" shows: the status
// page (/), the metrics (/metrics), liveness (/healthz) and readiness
// (/readyz).
type opsServer struct {
	nc     *natsgo.Conn
	js     jetstream.JetStream
	worker string
	// projections is set when this process keeps the projection buckets;
	// readiness then includes their lag.
	projections bool
	ops         opsFlags
	metrics     *metrics.Metrics
	tally       *metrics.Tally
	log         *slog.Logger
	// now is the engine's clock (the server's, as the limiter reads it);
	// nil for the machine's.
	now func() time.Time
	// limiter is the engine's, whose refused limits readiness reports.
	limiter *engine.Limiter
}

// clock is the time the status page reads the shared state at.
func (s *opsServer) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// newEngineMetrics returns the registry of "serpent run" (worker is its
// name) and the tally of the log it shows; the tally is fed by keepFold.
// now is the engine's clock: the accounts' slots, pauses and spending
// days are stamped by the server's, and read by it too.
func newEngineMetrics(js jetstream.JetStream, worker string, now func() time.Time) (*metrics.Metrics, *metrics.Tally) {
	tally := metrics.NewTally().ForgetFinished()
	lag := func(ctx context.Context) (projector.Lag, error) { return projector.ReadLag(ctx, js, "", now()) }
	last := func(ctx context.Context) (uint64, error) { return eventLogLastSeq(ctx, js) }
	accts := func(ctx context.Context) ([]metrics.Account, error) { return accountFigures(ctx, js, now()) }
	return metrics.New(metrics.Options{Tally: tally, Lag: lag, LastSeq: last, Accounts: accts, Worker: worker, Version: version}), tally
}

// eventLogLastSeq reads the last sequence of SERP_EVENTS from its stream
// information: with or without projections.
func eventLogLastSeq(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	st, err := js.Stream(ctx, snats.EventStream)
	if err != nil {
		return 0, err
	}
	return st.CachedInfo().State.LastSeq, nil
}

// accountFigures reads the API accounts' shared state for the metrics.
func accountFigures(ctx context.Context, js jetstream.JetStream, now time.Time) ([]metrics.Account, error) {
	sts, err := accountStatuses(ctx, js, now)
	if err != nil {
		return nil, err
	}
	out := make([]metrics.Account, 0, len(sts))
	for _, a := range sts {
		out = append(out, metrics.Account{Name: a.Account, SpentPages: a.SpentToday.Pages, SpentMicros: a.SpentToday.Micros,
			BudgetPages: a.Limits.DailyPages, BudgetMicros: a.Limits.DailyMicros, InFlight: a.InFlight,
			MaxInFlight: a.Limits.MaxInFlight, Waiting: a.WaitingWhy, Paused: a.PausedUntil != nil, LimitsRefused: a.Refused != nil})
	}
	return out, nil
}

// handler routes the endpoints.
func (s *opsServer) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.statusPage)
	mux.Handle("GET /metrics", s.metrics.Handler())
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	return mux
}

// serveHTTP listens on addr and serves until stop is called. It returns
// the address it listens on. The tally it shows is fed by keepFold.
func (s *opsServer) serveHTTP(addr string) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("HTTP endpoint on %s: %w (use --http)", addr, err)
	}
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("HTTP endpoint stopped", "err", err)
		}
	}()
	stop := func() {
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
	}
	return ln.Addr().String(), stop, nil
}
