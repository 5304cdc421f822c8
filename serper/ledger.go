package serper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// LedgerQuery selects billing ledger entries by attempt key, by request id,
// or both (an entry matching either is returned).
type LedgerQuery struct {
	Keys       []string
	RequestIDs []string
}

// LedgerEntry is one charge: every billed search has exactly one.
type LedgerEntry struct {
	RequestID      string    `json:"requestId"`
	IdempotencyKey string    `json:"idempotencyKey"`
	Pages          int       `json:"pages"`       // pages with results
	FreePages      int       `json:"freePages"`   // of those, paid by the free allowance
	BilledPages    int       `json:"billedPages"` // Pages - FreePages
	AmountMicros   int64     `json:"amountMicros"`
	BodySHA256     string    `json:"bodySha256"` // hex SHA-256 of the request body
	At             time.Time `json:"at"`
}

// ErrInvalidQuery is returned for a LedgerQuery with nothing to look up.
var ErrInvalidQuery = errors.New("invalid ledger query")

// LedgerError is a failed ledger lookup. Retryable tells the reconciler
// whether trying again later can help.
type LedgerError struct {
	Status     int    // confirmed HTTP status, 0 when the reply was not the API's
	Code       string // envelope code when confirmed
	Message    string
	RequestID  string
	Unknown    string // an Unknown* reason when not confirmed
	Detail     string
	RetryAfter time.Duration
	Err        error // the transport error, if any (message scrubbed)
}

func (e *LedgerError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("serper ledger: HTTP %d %s: %s (request %s)", e.Status, e.Code, e.Message, e.RequestID)
	}
	return fmt.Sprintf("serper ledger: no usable reply (%s): %s", e.Unknown, e.Detail)
}

func (e *LedgerError) Unwrap() error { return e.Err }

// Retryable is true when the lookup may succeed later: no usable reply,
// a timeout, rate limiting or a server-side failure. A 401 or 422 needs a
// fix, not a retry.
func (e *LedgerError) Retryable() bool {
	if e.Status == 0 {
		return true
	}
	return e.Status == http.StatusRequestTimeout || e.Status == http.StatusConflict ||
		e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// ledgerBatch bounds how many keys and ids go into one GET, keeping URLs short.
const ledgerBatch = 50

// Ledger returns the ledger entries matching q, each charge once (by request
// id), ordered by time then request id. Large queries are split into several
// requests. Errors are *LedgerError, or wrap ErrInvalidQuery.
func (c *Client) Ledger(ctx context.Context, q LedgerQuery) ([]LedgerEntry, error) {
	params := make([][2]string, 0, len(q.Keys)+len(q.RequestIDs))
	for _, k := range q.Keys {
		params = append(params, [2]string{"idempotencyKey", k})
	}
	for _, id := range q.RequestIDs {
		params = append(params, [2]string{"requestId", id})
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("%w: no keys and no request ids", ErrInvalidQuery)
	}
	for _, p := range params {
		if p[1] == "" || strings.Contains(p[1], ",") {
			return nil, fmt.Errorf("%w: %s %q is empty or holds a comma", ErrInvalidQuery, p[0], c.scrub.text(p[1]))
		}
	}
	seen := map[string]bool{}
	var out []LedgerEntry
	for batch := range slices.Chunk(params, ledgerBatch) {
		entries, err := c.ledgerPage(ctx, batch)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			if !seen[e.RequestID] {
				seen[e.RequestID] = true
				out = append(out, e)
			}
		}
	}
	slices.SortFunc(out, func(a, b LedgerEntry) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.RequestID, b.RequestID)
	})
	return out, nil
}

func (c *Client) ledgerPage(ctx context.Context, params [][2]string) ([]LedgerEntry, error) {
	v := url.Values{}
	for _, p := range params {
		v.Add(p[0], p[1])
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.ledgerURL+"?"+v.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidQuery, c.scrub.err(err))
	}
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		err = c.scrub.err(err)
		return nil, &LedgerError{Unknown: transportReason(ctx, err), Detail: err.Error(), Err: err}
	}
	defer resp.Body.Close()
	body, reason, err := readBody(resp.Body, resp.ContentLength, c.cfg.MaxResponseBytes)
	if reason != "" {
		err = c.scrub.err(err)
		return nil, &LedgerError{Unknown: reason, Detail: fmt.Sprintf("HTTP %d, then: %v", resp.StatusCode, err), Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		res := identify(reply{status: resp.StatusCode, header: resp.Header, body: body}, c.now(), c.scrub)
		return nil, &LedgerError{Status: res.Status, Code: res.Code, Message: res.Message, RequestID: res.RequestID,
			Unknown: res.Unknown, Detail: res.Detail, RetryAfter: res.RetryAfter}
	}
	return decodeLedger(body, c.scrub)
}

// decodeLedger checks a 200 ledger body: an entries array whose entries each
// carry a request id and a key.
func decodeLedger(body []byte, scrub redactor) ([]LedgerEntry, error) {
	var w struct {
		Entries *[]LedgerEntry `json:"entries"`
	}
	if err := json.Unmarshal(body, &w); err != nil || w.Entries == nil {
		detail := "200 without an entries array"
		if err != nil {
			detail = "200 whose body is not a ledger: " + jsonProblem(err)
		}
		return nil, &LedgerError{Unknown: UnknownUnexpectedReply, Detail: detail}
	}
	entries := *w.Entries
	for i, e := range entries {
		if !validRequestID(e.RequestID) || e.IdempotencyKey == "" {
			return nil, &LedgerError{Unknown: UnknownUnexpectedReply, Detail: fmt.Sprintf("ledger entry %d lacks a request id or key", i)}
		}
		entries[i].RequestID = scrub.text(e.RequestID)
		entries[i].IdempotencyKey = scrub.text(e.IdempotencyKey)
		entries[i].BodySHA256 = scrub.text(e.BodySHA256)
	}
	return entries, nil
}
