package httpops

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// readyTimeout bounds the checks of one /readyz.
const readyTimeout = 3 * time.Second

// accountsBucket is where the accounts' limits are stored, as the
// readiness lines name it.
const accountsBucket = "serp_accounts"

// healthz is liveness: 200 while the NATS connection is up.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if up, state := s.cfg.Source.Connection(); !up {
		http.Error(w, "nats: "+state, http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// readyz is readiness: NATS connected, the engine's streams and buckets
// present, and the projections no further behind than --ready-max-lag
// events, their oldest event to apply waiting no longer than
// --ready-max-behind, and not catching up in this engine. It answers 200
// or 503 with one line per check.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	lines, ok := s.readiness(ctx)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprint(w, strings.Join(lines, "\n")+"\n")
}

// readiness runs every check and reports each as "ok ..." or "FAIL ...";
// a refused value of an account's limits whose earlier limits still hold
// is "warn ...", and does not fail it.
func (s *Server) readiness(ctx context.Context) ([]string, bool) {
	var lines []string
	ready := true
	check := func(what string, err error) {
		if err != nil {
			ready = false
			lines = append(lines, fmt.Sprintf("FAIL %s: %v", what, err))
			return
		}
		lines = append(lines, "ok   "+what)
	}
	if up, state := s.cfg.Source.Connection(); !up {
		check("nats connected", fmt.Errorf("connection is %s", state))
		return lines, false
	}
	check("nats connected", nil)
	for _, name := range s.cfg.Streams {
		check("stream "+name, s.cfg.Source.Stream(ctx, name))
	}
	for _, b := range s.cfg.Buckets {
		check("bucket "+b, s.cfg.Source.Bucket(ctx, b))
	}
	for _, r := range s.refusals() {
		what := fmt.Sprintf("account %s limits: key %s of bucket %s is refused (%v)", r.Account, r.Key, accountsBucket, r.Err)
		if r.Held {
			// Fail closed: no limits to keep, no new purchase of the account.
			check(what, errors.New("none were applied before: new purchases of the account are held until it is mended (serpent accounts set)"))
			continue
		}
		lines = append(lines, "warn "+what+": the limits applied before hold until it is mended (serpent accounts set)")
	}
	if s.cfg.Projections {
		lag, err := s.cfg.Source.Lag(ctx, time.Now())
		if c := lag.CatchUp; err == nil && c != nil {
			err = fmt.Errorf("catching up: %d of %d events applied (%d%%), %.0f events/s, about %s left",
				c.Done, c.Total, c.Done*100/max(c.Total, 1), c.Rate, c.Left.Round(time.Second))
		}
		if err == nil && lag.Pending > s.cfg.ReadyMaxLag {
			err = fmt.Errorf("%d events to apply, more than --ready-max-lag %d", lag.Pending, s.cfg.ReadyMaxLag)
		}
		if err == nil && lag.Behind > s.cfg.ReadyMaxBehind {
			err = fmt.Errorf("the oldest event to apply has waited %s, more than --ready-max-behind %s", lag.Behind.Round(time.Millisecond), s.cfg.ReadyMaxBehind)
		}
		check(fmt.Sprintf("projection lag %d events", lag.Pending), err)
	}
	return lines, ready
}

// refusals are the accounts whose stored limits the engine's limiter
// refuses; none without a limiter.
func (s *Server) refusals() []Refusal {
	if s.cfg.Refusals == nil {
		return nil
	}
	return s.cfg.Refusals()
}
