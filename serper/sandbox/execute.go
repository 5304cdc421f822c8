package sandbox

import (
	"encoding/json"
	"net/http"
	"time"
)

// startLocked records key as running and starts its execution. The caller
// holds s.mu, so the fault plan and the request id follow request order.
func (s *Server) startLocked(key, bodySum string, params searchParams) *keyRecord {
	return s.runLocked(key, bodySum, params, s.dice.plan(s.cfg.Faults))
}

// runLocked records key as running and starts an execution of it with the
// given fault plan. The caller holds s.mu.
func (s *Server) runLocked(key, bodySum string, params searchParams, p plan) *keyRecord {
	rec := &keyRecord{
		key:       key,
		bodySum:   bodySum,
		firstAt:   s.now(),
		requestID: s.nextRequestIDLocked(),
		plan:      p,
		done:      make(chan struct{}),
	}
	s.keys[key] = rec
	s.stats.Executions++
	s.stats.Running++
	s.work.Add(1)
	d := s.cfg.SearchTime
	if rec.plan.slow {
		d = s.cfg.SlowSearchTime
	}
	go s.execute(rec, params, d)
	return rec
}

// execute runs the search for d, then settles it: reply, billing, cache.
// It is detached from the request that started it.
func (s *Server) execute(rec *keyRecord, params searchParams, d time.Duration) {
	defer s.work.Done()
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-s.closing:
			t.Stop()
			return
		}
	}
	results := organic(params)
	if rec.plan.zero {
		results = []organicResult{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.countFaultIf(rec.plan.slow, FaultSlowSearch)
	now := s.now()
	s.settleLocked(now) // late charges due before this one take the free pages first
	switch rec.plan.failure {
	case FaultTimeout408:
		rec.reply = errorReply(http.StatusRequestTimeout, "search_timeout", "the search did not finish in time; nothing was billed", rec.requestID, nil)
	case FaultFailed424:
		rec.reply = errorReply(http.StatusFailedDependency, "upstream_failed", "a dependency of the search failed; nothing was billed", rec.requestID, nil)
	case FaultUnavailable503:
		rec.reply = errorReply(http.StatusServiceUnavailable, "service_unavailable", "the search service is unavailable; nothing was billed", rec.requestID, nil)
	default:
		pages := pagesFor(len(results))
		rec.reply = successReply(rec.requestID, params, results, pages, now)
		switch {
		case pages > 0 && rec.plan.billingLate:
			s.deferLocked(rec, pages, now)
			s.countFaultIf(true, FaultBillingLate)
		case pages > 0:
			s.billLocked(rec, pages, now)
		}
	}
	s.countFaultIf(rec.plan.failure != "", rec.plan.failure)
	s.countFaultIf(rec.plan.zero && rec.plan.failure == "", FaultZeroResults)
	if rec.plan.earlyExpiry {
		rec.cacheGone = true
		s.countFaultIf(true, FaultEarlyExpiry)
	}
	rec.finished = true
	s.stats.Running--
	close(rec.done)
}

func successReply(requestID string, p searchParams, results []organicResult, pages int, now time.Time) cachedReply {
	body, _ := json.Marshal(struct {
		RequestID  string          `json:"requestId"`
		Search     searchParams    `json:"search"`
		Organic    []organicResult `json:"organic"`
		Pages      int             `json:"pages"`
		SearchedAt string          `json:"searchedAt"`
	}{requestID, p, results, pages, now.UTC().Format(time.RFC3339)})
	return cachedReply{status: http.StatusOK, body: body, requestID: requestID}
}
