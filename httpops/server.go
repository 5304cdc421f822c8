package httpops

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/serpent-engine/serpent/projections"
)

// Config configures a Server.
type Config struct {
	// Source is what the server reads at each request.
	Source Source
	// Tally is the engine's fold of the log, which the status page shows.
	Tally *projections.Tally
	// Metrics serves /metrics (metrics.Metrics.Handler); nil for none.
	Metrics http.Handler
	// Worker and Version name the engine on the status page.
	Worker  string
	Version string
	// Sandbox, when set, says where the sandbox the engine talks to is:
	// the page then shows a sandbox banner with it.
	Sandbox string
	// Streams and Buckets must be there for the engine to be ready.
	Streams []string
	Buckets []string
	// Projections is set when the engine keeps the projection buckets:
	// readiness then includes their lag, within ReadyMaxLag events and
	// ReadyMaxBehind of wait.
	Projections    bool
	ReadyMaxLag    uint64
	ReadyMaxBehind time.Duration
	// Refusals lists the accounts whose stored limits the engine's limiter
	// refuses; nil for none.
	Refusals func() []Refusal
	// Now is the engine's clock (the server's, as the engine reads it);
	// nil for the machine's.
	Now    func() time.Time
	Logger *slog.Logger
}

// Server is the HTTP server of serpent run: the status page (/), the
// metrics (/metrics), liveness (/healthz) and readiness (/readyz).
type Server struct {
	cfg Config
}

// New returns a server of cfg.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg}
}

// Handler routes the endpoints.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.statusPage)
	if s.cfg.Metrics != nil {
		mux.Handle("GET /metrics", s.cfg.Metrics)
	}
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	return mux
}

// Serve listens on addr and serves until stop is called. It returns the
// address it listens on.
func (s *Server) Serve(addr string) (string, func(), error) {
	e, err := Listen(addr, s.Handler(), s.cfg.Logger)
	if err != nil {
		return "", nil, err
	}
	return e.Addr(), e.Stop, nil
}
