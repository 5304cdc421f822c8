package sandbox

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Server is the simulated API. It is an http.Handler; Start also serves it
// on an address. It is safe for concurrent use. Close it when done: that
// stops running searches.
type Server struct {
	cfg     Config // Faults is guarded by mu; the rest is read-only
	log     *slog.Logger
	mux     *http.ServeMux
	closing chan struct{}
	once    sync.Once
	work    sync.WaitGroup // running executions and the serve loop

	mu       sync.Mutex
	dice     dice
	ids      uint64
	keys     map[string]*keyRecord
	ledger   []LedgerEntry
	late     []*keyRecord // charges not written yet (BillingLate)
	freeLeft int
	stats    counters
	httpSrv  *http.Server
	closed   bool // set by Close before it waits: no execution starts after
}

// New returns a Server for cfg, defaults applied. New does not fail: values
// Validate would refuse are clamped, so validate configs from users first.
func New(cfg Config) *Server {
	cfg = cfg.withDefaults().sanitize()
	s := &Server{
		cfg:      cfg,
		log:      cfg.Logger,
		mux:      http.NewServeMux(),
		closing:  make(chan struct{}),
		dice:     newDice(cfg.Seed),
		keys:     map[string]*keyRecord{},
		freeLeft: cfg.FreePages,
		stats:    newCounters(),
	}
	s.mux.HandleFunc("/v1/search", s.handleSearch)
	s.mux.HandleFunc("/v1/billing/ledger", s.handleLedger)
	s.mux.HandleFunc("/v1/sandbox/stats", s.handleStats)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		errorReply(http.StatusNotFound, "not_found", "no such endpoint: "+r.URL.Path, s.newRequestID(), nil).write(w, false)
	})
	return s
}

// ServeHTTP serves the API's endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// SetFaults replaces the fault probabilities (clamped to [0, 1]) from the
// next request on.
func (s *Server) SetFaults(f Faults) {
	c := Config{Faults: f}.sanitize()
	s.mu.Lock()
	s.cfg.Faults = c.Faults
	s.mu.Unlock()
}

// SetSearchTime changes how long the searches that start from now on run
// (Config.SearchTime); those running keep theirs.
func (s *Server) SetSearchTime(d time.Duration) {
	s.mu.Lock()
	s.cfg.SearchTime = max(d, 0)
	s.mu.Unlock()
}

// Start serves s on addr ("127.0.0.1:0" picks a free port) and returns its
// base URL, such as http://127.0.0.1:41234.
func (s *Server) Start(addr string) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	s.mu.Lock()
	if s.httpSrv != nil || s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return "", errors.New("sandbox: already started or closed")
	}
	s.httpSrv = srv
	s.work.Add(1) // under the lock, so it happens before Close's Wait
	s.mu.Unlock()
	go func() {
		defer s.work.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("sandbox: serve", "err", err)
		}
	}()
	return "http://" + ln.Addr().String(), nil
}

// Close stops running searches (their keys stay "running" forever), shuts
// the listener down if Start opened one, and waits for its goroutines.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		close(s.closing)
		s.mu.Lock()
		s.closed = true
		srv := s.httpSrv
		s.mu.Unlock()
		if srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err = srv.Shutdown(ctx); err != nil {
				err = srv.Close()
			}
			cancel()
		}
		s.work.Wait()
	})
	return err
}

// authorized checks the bearer token in constant time.
func (s *Server) authorized(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) == 1
}

// unauthorized answers 401; it is not an execution and records nothing.
func (s *Server) unauthorized(w http.ResponseWriter) {
	s.mu.Lock()
	s.stats.Unauthorized++
	s.mu.Unlock()
	errorReply(http.StatusUnauthorized, "unauthorized", "missing or invalid bearer token", s.newRequestID(), nil).write(w, false)
}

// newRequestID hands out ids that are unique and, for a seed and an order
// of requests, reproducible.
func (s *Server) newRequestID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nextRequestIDLocked()
}

func (s *Server) nextRequestIDLocked() string {
	s.ids++
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(s.cfg.Seed))
	binary.BigEndian.PutUint64(b[8:], s.ids)
	sum := sha256.Sum256(b[:])
	return "req_" + hex.EncodeToString(sum[:12])
}

func (s *Server) now() time.Time { return s.cfg.Now() }
