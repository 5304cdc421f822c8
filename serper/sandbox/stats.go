package sandbox

import (
	"maps"
	"net/http"
	"sort"
)

// Stats are the sandbox's counters: what ran, what was charged, and what the
// clients did. A test proves "no observation bought twice" with
// MaxChargesPerBody <= 1 (when each job has its own body) and finds the
// offenders in BodiesChargedTwice.
type Stats struct {
	Requests          int   `json:"requests"`          // POST /v1/search requests received
	Executions        int   `json:"executions"`        // searches started (fresh keys)
	Running           int   `json:"running"`           // searches running now
	Charges           int   `json:"charges"`           // ledger entries
	Pages             int   `json:"pages"`             // pages with results charged, free or billed
	BilledPages       int   `json:"billedPages"`       // of those, paid
	FreePagesUsed     int   `json:"freePagesUsed"`     // of those, free
	AmountMicros      int64 `json:"amountMicros"`      // total billed
	Replays           int   `json:"replays"`           // cached first responses sent again
	InProgress        int   `json:"inProgress"`        // 409 idempotency_in_progress answers
	ReplayUnavailable int   `json:"replayUnavailable"` // 409 idempotency_replay_unavailable answers
	BillingUnsettled  int   `json:"billingUnsettled"`  // 503 billing_unavailable answers to resends of a key whose charge is late
	BodyViolations    int   `json:"bodyViolations"`    // known keys sent with a different body
	Forgotten         int   `json:"forgotten"`         // unbilled keys forgotten past the window
	Unauthorized      int   `json:"unauthorized"`      // 401 answers
	InvalidRequests   int   `json:"invalidRequests"`   // 422 answers
	// Faults counts the faults that took effect, by kind.
	Faults map[FaultKind]int `json:"faults"`
	// ChargesPerKey and ChargesPerBody count ledger entries by attempt key
	// and by the hex SHA-256 of the request body.
	ChargesPerKey      map[string]int `json:"chargesPerKey"`
	ChargesPerBody     map[string]int `json:"chargesPerBody"`
	MaxChargesPerBody  int            `json:"maxChargesPerBody"`
	BodiesChargedTwice []string       `json:"bodiesChargedTwice"` // body hashes charged more than once, sorted
}

// counters is Stats as kept under the server's lock.
type counters Stats

func newCounters() counters {
	return counters{Faults: map[FaultKind]int{}, ChargesPerKey: map[string]int{}, ChargesPerBody: map[string]int{}}
}

func (c *counters) charge(e LedgerEntry) {
	c.Charges++
	c.Pages += e.Pages
	c.BilledPages += e.BilledPages
	c.FreePagesUsed += e.FreePages
	c.AmountMicros += e.AmountMicros
	c.ChargesPerKey[e.IdempotencyKey]++
	c.ChargesPerBody[e.BodySHA256]++
}

// countFaultIf counts kind when the fault took effect. Callers hold s.mu.
func (s *Server) countFaultIf(took bool, kind FaultKind) {
	if took && kind != "" {
		s.stats.Faults[kind]++
	}
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	s.settleLocked(s.now())
	st := Stats(s.stats)
	st.Faults = maps.Clone(s.stats.Faults)
	st.ChargesPerKey = maps.Clone(s.stats.ChargesPerKey)
	st.ChargesPerBody = maps.Clone(s.stats.ChargesPerBody)
	s.mu.Unlock()
	st.BodiesChargedTwice = []string{}
	for body, n := range st.ChargesPerBody {
		st.MaxChargesPerBody = max(st.MaxChargesPerBody, n)
		if n > 1 {
			st.BodiesChargedTwice = append(st.BodiesChargedTwice, body)
		}
	}
	sort.Strings(st.BodiesChargedTwice)
	return st
}

// handleStats is GET /v1/sandbox/stats (bearer token required).
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(r) {
		s.unauthorized(w)
		return
	}
	writeJSON(w, http.StatusOK, s.Stats())
}
