package sandbox

import "time"

// keyRecord is what the API remembers about one Idempotency-Key.
type keyRecord struct {
	key       string
	bodySum   string        // hex SHA-256 of the first body
	firstAt   time.Time     // start of the first execution; the window runs from here
	requestID string        // the execution's request id
	plan      plan          // drawn at the start; read-only afterwards
	done      chan struct{} // closed when the execution finished

	// Set under the server's lock when the execution finishes (done closed).
	finished  bool
	reply     cachedReply
	billed    bool // has a ledger entry
	cacheGone bool // EarlyExpiry dropped the cached response
	// A search hit by BillingLate is charged latePages pages at lateAt;
	// lateAt is zero once the entry is written (or if it never was late).
	lateAt    time.Time
	latePages int
}

// unsettled reports whether rec ran and is charged, but its ledger entry is
// not written yet (BillingLate).
func (rec *keyRecord) unsettled() bool { return !rec.lateAt.IsZero() }

// keyState is what a request with a known or fresh key will get.
type keyState int

const (
	keyFresh             keyState = iota // unknown (or forgotten): execute
	keyRunning                           // 409 idempotency_in_progress
	keyReplay                            // the cached first response
	keyReplayUnavailable                 // billed, cache gone: 409 with the original request id
	keyUnsettled                         // ran, charge not in the ledger yet: 503 billing_unavailable
)

// lookupLocked classifies key at now, forgetting an expired unbilled key.
// A key whose charge is late is never forgotten: it answers 503
// billing_unavailable until the charge is written, within the window or
// past it. The caller holds s.mu and has settled the charges due by now.
func (s *Server) lookupLocked(key string, now time.Time) (*keyRecord, keyState) {
	rec := s.keys[key]
	switch {
	case rec == nil:
		return nil, keyFresh
	case !rec.finished:
		return rec, keyRunning
	case rec.unsettled():
		return rec, keyUnsettled
	case !rec.cacheGone && now.Before(rec.firstAt.Add(s.cfg.ReplayWindow)):
		return rec, keyReplay
	case rec.billed:
		return rec, keyReplayUnavailable
	}
	delete(s.keys, key)
	s.stats.Forgotten++
	return nil, keyFresh
}
