package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
)

// readyTimeout bounds the checks of one /readyz.
const readyTimeout = 3 * time.Second

// healthz is liveness: 200 while the NATS connection is up.
func (s *opsServer) healthz(w http.ResponseWriter, _ *http.Request) {
	if !s.nc.IsConnected() {
		http.Error(w, "nats: "+s.nc.Status().String(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

// readyz is readiness: NATS connected, the engine's streams and buckets
// present, and the projections no further behind than --ready-max-lag
// events, their oldest event to apply waiting no longer than
// --ready-max-behind. It answers 200 or 503 with one line per check.
func (s *opsServer) readyz(w http.ResponseWriter, r *http.Request) {
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
func (s *opsServer) readiness(ctx context.Context) ([]string, bool) {
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
	if !s.nc.IsConnected() {
		check("nats connected", fmt.Errorf("connection is %s", s.nc.Status()))
		return lines, false
	}
	check("nats connected", nil)
	for _, name := range []string{snats.EventStream, snats.CommandStream, snats.RejectStream, snats.WorkStream} {
		_, err := s.js.Stream(ctx, name)
		check("stream "+name, err)
	}
	// The engine's own buckets: schedules, and the accounts' limits, which
	// every search takes a slot, a token or a budget from.
	buckets := []string{snats.SchedulesBucket, snats.AccountsBucket}
	if s.projections {
		buckets = append(buckets, projections.Buckets()...)
		buckets = append(buckets, projector.ControlBucket)
	}
	for _, b := range buckets {
		_, err := s.js.KeyValue(ctx, b)
		check("bucket "+b, err)
	}
	for _, r := range s.refusals() {
		what := fmt.Sprintf("account %s limits: key %s of bucket %s is refused (%v)", r.Account, r.Key, snats.AccountsBucket, r.Err)
		if r.Held {
			// Fail closed: no limits to keep, no new purchase of the account.
			check(what, errors.New("none were applied before: new purchases of the account are held until it is mended (serpent accounts set)"))
			continue
		}
		lines = append(lines, "warn "+what+": the limits applied before hold until it is mended (serpent accounts set)")
	}
	if s.projections {
		lag, err := projector.ReadLag(ctx, s.js, "", time.Now())
		if err == nil && lag.Pending > s.ops.readyMaxLag {
			err = fmt.Errorf("%d events to apply, more than --ready-max-lag %d", lag.Pending, s.ops.readyMaxLag)
		}
		if err == nil && lag.Behind > s.ops.readyMaxBehind {
			err = fmt.Errorf("the oldest event to apply has waited %s, more than --ready-max-behind %s", lag.Behind.Round(time.Millisecond), s.ops.readyMaxBehind)
		}
		check(fmt.Sprintf("projection lag %d events", lag.Pending), err)
	}
	return lines, ready
}

// refusals are the accounts whose stored limits the engine's limiter
// refuses; none without a limiter.
func (s *opsServer) refusals() []engine.Refusal {
	if s.limiter == nil {
		return nil
	}
	return s.limiter.Refusals()
}
