package httpops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// Endpoint is the HTTP listener of serpent run. It listens from the first
// moment, so /readyz can say why the engine is not ready while it starts;
// Handle then gives it the full server.
type Endpoint struct {
	addr string
	h    atomic.Pointer[http.Handler]
	stop func()
}

// Listen listens on addr and serves h until Stop.
func Listen(addr string, h http.Handler, log *slog.Logger) (*Endpoint, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("HTTP endpoint on %s: %w (use --http)", addr, err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Endpoint{addr: ln.Addr().String()}
	e.Handle(h)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*e.h.Load()).ServeHTTP(w, r) }),
		ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("HTTP endpoint stopped", "err", err)
		}
	}()
	e.stop = func() {
		sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
	}
	return e, nil
}

// Addr is the address the endpoint listens on.
func (e *Endpoint) Addr() string { return e.addr }

// Handle serves h from now on.
func (e *Endpoint) Handle(h http.Handler) { e.h.Store(&h) }

// Stop closes the listener and waits up to 2 s for requests to finish.
func (e *Endpoint) Stop() { e.stop() }

// Starting serves an engine that is not connected yet. /healthz answers
// 200: the process is alive and keeps trying. /readyz and the status page
// answer 503 with the reason that reason returns.
func Starting(reason func() string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok (starting)")
	})
	notReady := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintf(w, "FAIL starting: %s\n", reason())
	}
	mux.HandleFunc("GET /readyz", notReady)
	mux.HandleFunc("GET /{$}", notReady)
	return mux
}
