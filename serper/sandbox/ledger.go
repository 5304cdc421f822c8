package sandbox

import (
	"net/http"
	"slices"
	"strings"
	"time"
)

// LedgerEntry is one charge, as GET /v1/billing/ledger lists it.
type LedgerEntry struct {
	RequestID      string    `json:"requestId"`
	IdempotencyKey string    `json:"idempotencyKey"`
	Pages          int       `json:"pages"`
	FreePages      int       `json:"freePages"`
	BilledPages    int       `json:"billedPages"`
	AmountMicros   int64     `json:"amountMicros"`
	BodySHA256     string    `json:"bodySha256"`
	At             time.Time `json:"at"`
}

// billLocked charges rec's pages, free pages first, in one ledger entry.
func (s *Server) billLocked(rec *keyRecord, pages int, now time.Time) {
	free := min(pages, s.freeLeft)
	s.freeLeft -= free
	e := LedgerEntry{
		RequestID: rec.requestID, IdempotencyKey: rec.key, Pages: pages, FreePages: free,
		BilledPages: pages - free, AmountMicros: int64(pages-free) * s.cfg.PriceMicros,
		BodySHA256: rec.bodySum, At: now.UTC(),
	}
	s.ledger = append(s.ledger, e)
	rec.billed = true
	s.stats.charge(e)
}

// deferLocked schedules rec's charge for BillingDelay after now, the end of
// its search (the BillingLate fault). Until then the key is unsettled.
func (s *Server) deferLocked(rec *keyRecord, pages int, now time.Time) {
	rec.lateAt, rec.latePages = now.Add(s.cfg.BillingDelay), pages
	s.late = append(s.late, rec)
}

// settleLocked writes the late charges due by now, in the order they fall
// due, each dated when it fell due. Everything that shows the ledger or a
// key's state settles first, so a charge appears at its time as a timer
// would write it, on a fake clock too. The caller holds s.mu.
func (s *Server) settleLocked(now time.Time) {
	if len(s.late) == 0 {
		return
	}
	slices.SortStableFunc(s.late, func(a, b *keyRecord) int { return a.lateAt.Compare(b.lateAt) })
	n := 0
	for _, rec := range s.late {
		if now.Before(rec.lateAt) {
			break
		}
		s.billLocked(rec, rec.latePages, rec.lateAt)
		rec.lateAt, rec.latePages = time.Time{}, 0
		n++
	}
	s.late = slices.Delete(s.late, 0, n)
}

// maxLedgerQuery bounds the keys and ids of one ledger query.
const maxLedgerQuery = 200

// handleLedger is GET /v1/billing/ledger?idempotencyKey=K&requestId=R&day=D,
// each repeatable or a comma list; an entry matching any of them is
// listed. A day (YYYY-MM-DD, UTC) lists every charge made that day: the
// full export serpent audit --ledger-file takes.
func (s *Server) handleLedger(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		errorReply(http.StatusMethodNotAllowed, "method_not_allowed", "use GET", s.newRequestID(), nil).write(w, false)
		return
	}
	if !s.authorized(r) {
		s.unauthorized(w)
		return
	}
	q := r.URL.Query()
	keys, ids, days := splitParams(q["idempotencyKey"]), splitParams(q["requestId"]), splitParams(q["day"])
	switch n := len(keys) + len(ids) + len(days); {
	case n == 0:
		s.invalid(w, &invalidRequest{fields: []string{"idempotencyKey", "requestId", "day"},
			reasons: []string{"idempotencyKey, requestId or day is required"}})
		return
	case n > maxLedgerQuery:
		s.invalid(w, &invalidRequest{fields: []string{"idempotencyKey", "requestId", "day"},
			reasons: []string{"at most 200 keys, request ids and days per query"}})
		return
	}
	for _, d := range days {
		if _, err := time.Parse(time.DateOnly, d); err != nil {
			s.invalid(w, &invalidRequest{fields: []string{"day"}, reasons: []string{"day is a UTC date, YYYY-MM-DD"}})
			return
		}
	}
	s.mu.Lock()
	s.settleLocked(s.now())
	entries := []LedgerEntry{}
	for _, e := range s.ledger {
		if slices.Contains(keys, e.IdempotencyKey) || slices.Contains(ids, e.RequestID) || slices.Contains(days, e.At.Format(time.DateOnly)) {
			entries = append(entries, e)
		}
	}
	id := s.nextRequestIDLocked()
	s.mu.Unlock()
	w.Header().Set("X-Request-Id", id)
	writeJSON(w, http.StatusOK, struct {
		Entries []LedgerEntry `json:"entries"`
	}{entries})
}

func splitParams(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
