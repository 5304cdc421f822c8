package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"net/http"

	"github.com/google/uuid"
)

// maxBody bounds a search request body.
const maxBody = 64 << 10

// handleSearch is POST /v1/search: transport faults, authentication, the key
// lookup, and for a fresh key validation, rate limiting and the execution.
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		errorReply(http.StatusMethodNotAllowed, "method_not_allowed", "use POST", s.newRequestID(), nil).write(w, false)
		return
	}
	s.mu.Lock()
	s.stats.Requests++
	tf := s.dice.transport(s.cfg.Faults)
	s.countFaultIf(tf.dropBefore, FaultDropBeforeSearch)
	s.countFaultIf(tf.gateway502, FaultGatewayPage502)
	s.mu.Unlock()
	switch {
	case tf.dropBefore:
		s.answered(r, 0, "fault: connection dropped before the search")
		drop(w)
		return
	case tf.gateway502:
		s.answered(r, http.StatusBadGateway, "fault: gateway page before the search")
		gatewayPage(w, http.StatusBadGateway)
		return
	case !s.authorized(r):
		s.answered(r, http.StatusUnauthorized, "unauthorized")
		s.unauthorized(w)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if _, err := uuid.Parse(key); err != nil || len(key) != 36 {
		s.invalid(w, &invalidRequest{fields: []string{"Idempotency-Key"}, reasons: []string{"Idempotency-Key must be a UUID"}})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return // the client went away mid-body; nothing was recorded
	}
	if len(body) > maxBody {
		s.invalid(w, &invalidRequest{fields: []string{"body"}, reasons: []string{"body is over 64 KiB"}})
		return
	}
	s.mu.Lock()
	front := s.dice.frontDoor(s.cfg.Faults)
	s.countFaultIf(front >= 0, FaultFrontDoor)
	var id string
	if front >= 0 {
		id = s.nextRequestIDLocked()
	}
	s.mu.Unlock()
	if front >= 0 {
		fe := frontDoorErrors[front]
		s.answered(r, fe.status, "fault: front-door error before the key lookup")
		reply := errorReply(fe.status, fe.code, fe.msg, id, nil)
		if fe.status == http.StatusTooManyRequests {
			writeRateLimited(w, reply, int(math.Ceil(s.cfg.RetryAfter.Seconds())))
			return
		}
		reply.write(w, false)
		return
	}
	sum := sha256.Sum256(body)
	s.serveKey(w, r, key, hex.EncodeToString(sum[:]), body)
}

// serveKey answers from the key's record, or executes a fresh key.
func (s *Server) serveKey(w http.ResponseWriter, r *http.Request, key, bodySum string, body []byte) {
	s.mu.Lock()
	now := s.now()
	s.settleLocked(now)
	rec, state := s.lookupLocked(key, now)
	if rec != nil && rec.bodySum != bodySum {
		s.stats.BodyViolations++
	}
	if (state == keyReplay || state == keyReplayUnavailable) && rec.billed {
		if lost, dropAfter := s.dice.lostRecord(s.cfg.Faults); lost {
			s.rerunLocked(w, r, rec, dropAfter, body)
			return
		}
	}
	switch state {
	case keyRunning:
		s.stats.InProgress++
		id := s.nextRequestIDLocked()
		s.mu.Unlock()
		s.answered(r, http.StatusConflict, "idempotency_in_progress")
		errorReply(http.StatusConflict, "idempotency_in_progress",
			"a request with this Idempotency-Key is still running; retry later with the same key", id, nil).write(w, false)
		return
	case keyReplay:
		s.stats.Replays++
		s.mu.Unlock()
		s.answered(r, rec.reply.status, "replay")
		rec.reply.write(w, true)
		return
	case keyUnsettled:
		s.stats.BillingUnsettled++
		s.mu.Unlock()
		s.answered(r, http.StatusServiceUnavailable, "billing_unavailable (charge not in the ledger yet)")
		billingUnavailable(rec.requestID).write(w, false)
		return
	case keyReplayUnavailable:
		s.stats.ReplayUnavailable++
		s.mu.Unlock()
		s.answered(r, http.StatusConflict, "idempotency_replay_unavailable")
		errorReply(http.StatusConflict, "idempotency_replay_unavailable",
			"this request was executed and billed, but its cached response is no longer available; see the billing ledger",
			rec.requestID, nil).write(w, false)
		return
	}
	params, bad := parseSearch(r.Header.Get("Content-Type"), body)
	if bad != nil {
		s.mu.Unlock()
		s.answered(r, http.StatusUnprocessableEntity, bad.Error())
		s.invalid(w, bad)
		return
	}
	if s.dice.roll(s.cfg.Faults.RateLimited429) {
		s.countFaultIf(true, FaultRateLimited429)
		id := s.nextRequestIDLocked()
		s.mu.Unlock()
		s.answered(r, http.StatusTooManyRequests, "fault: rate limited")
		writeRateLimited(w, errorReply(http.StatusTooManyRequests, "rate_limited", "too many requests; retry after the delay with a new key", id, nil),
			int(math.Ceil(s.cfg.RetryAfter.Seconds())))
		return
	}
	if s.closed {
		s.mu.Unlock()
		drop(w)
		return
	}
	rec = s.startLocked(key, bodySum, params)
	s.mu.Unlock()
	s.awaitExecution(w, r, rec)
}

// rerunLocked plays the LostRecord fault: the API lost the record of a
// billed key, runs its search again and bills it again, without the
// replay header. The run always has results and is billed; dropAfter
// loses its reply. The caller holds s.mu; rerunLocked releases it.
func (s *Server) rerunLocked(w http.ResponseWriter, r *http.Request, old *keyRecord, dropAfter bool, body []byte) {
	params, bad := parseSearch(r.Header.Get("Content-Type"), body)
	if bad != nil {
		s.mu.Unlock()
		s.answered(r, http.StatusUnprocessableEntity, bad.Error())
		s.invalid(w, bad)
		return
	}
	if s.closed {
		s.mu.Unlock()
		drop(w)
		return
	}
	s.countFaultIf(true, FaultLostRecord)
	rec := s.runLocked(old.key, old.bodySum, params, plan{dropAfter: dropAfter})
	s.mu.Unlock()
	s.awaitExecution(w, r, rec)
}

// invalid answers 422 before the key is recorded: not an execution.
func (s *Server) invalid(w http.ResponseWriter, bad *invalidRequest) {
	s.mu.Lock()
	s.stats.InvalidRequests++
	id := s.nextRequestIDLocked()
	s.mu.Unlock()
	errorReply(http.StatusUnprocessableEntity, "invalid_request", bad.Error(), id, bad.fields).write(w, false)
}

// awaitExecution waits for the execution this request started and sends its
// reply, altered by the faults planned for after the search.
func (s *Server) awaitExecution(w http.ResponseWriter, r *http.Request, rec *keyRecord) {
	select {
	case <-rec.done:
	case <-r.Context().Done():
		s.answered(r, 0, "client hung up; the search goes on")
		return
	case <-s.closing:
		drop(w)
		return
	}
	p := rec.plan
	s.mu.Lock()
	reply, billed := rec.reply, rec.billed
	billing503 := p.billingUnavailable() && (billed || rec.unsettled())
	s.countFaultIf(billing503, FaultBillingUnavailable503)
	s.countFaultIf(p.dropAfter && !billing503, FaultDropAfterSearch)
	s.countFaultIf(p.gateway504 && !billing503, FaultGatewayPage504)
	s.mu.Unlock()
	s.answered(r, reply.status, fmt.Sprintf("executed (billed %t, faults %s)", billed, p))
	switch {
	case billing503:
		billingUnavailable(rec.requestID).write(w, false)
	case p.dropAfter:
		drop(w)
	case p.gateway504:
		gatewayPage(w, http.StatusGatewayTimeout)
	default:
		reply.write(w, false)
	}
}

// billingUnavailable is the 503 for a search that ran and whose billing is
// not confirmed. It is never the cached response.
func billingUnavailable(requestID string) cachedReply {
	return errorReply(http.StatusServiceUnavailable, "billing_unavailable",
		"the search ran but billing could not be confirmed; retry with the same key", requestID, nil)
}

// answered logs one line per search request at debug level: the key, the
// status sent (0: none) and what happened. Never the Authorization header.
func (s *Server) answered(r *http.Request, status int, what string) {
	s.log.Debug("sandbox: search", "key", r.Header.Get("Idempotency-Key"), "status", status, "what", what)
}
