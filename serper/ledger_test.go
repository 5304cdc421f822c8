package serper

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLedgerErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		wantCode  string
		unknown   string
		retryable bool
	}{
		{"401", 401, `{"error":{"code":"unauthorized","message":"no","requestId":"req_1"}}`, CodeUnauthorized, "", false},
		{"422", 422, `{"error":{"code":"invalid_request","message":"no","requestId":"req_1"}}`, CodeInvalidRequest, "", false},
		{"429", 429, `{"error":{"code":"rate_limited","message":"slow","requestId":"req_1"}}`, CodeRateLimited, "", true},
		{"503", 503, `{"error":{"code":"service_unavailable","message":"later","requestId":"req_1"}}`, CodeServiceUnavailable, "", true},
		{"gateway page", 502, `<html>502</html>`, "", UnknownGatewayPage, true},
		{"200 not a ledger", 200, `{"items":[]}`, "", UnknownUnexpectedReply, true},
		{"200 malformed", 200, `{"entries":[`, "", UnknownUnexpectedReply, true},
		{"200 entry without request id", 200, `{"entries":[{"idempotencyKey":"k"}]}`, "", UnknownUnexpectedReply, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := setup(t, time.Second, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			})
			_, err := c.Ledger(context.Background(), LedgerQuery{Keys: []string{testKey}})
			var le *LedgerError
			require.ErrorAs(t, err, &le)
			require.Equal(t, tt.wantCode, le.Code)
			require.Equal(t, tt.unknown, le.Unknown)
			require.Equal(t, tt.retryable, le.Retryable())
			require.NotEmpty(t, le.Error())
		})
	}
}

func TestLedgerQueryValidation(t *testing.T) {
	c, n := setup(t, time.Second, func(w http.ResponseWriter, r *http.Request) {})
	for _, q := range []LedgerQuery{{}, {Keys: []string{""}}, {RequestIDs: []string{"a,b"}}} {
		_, err := c.Ledger(context.Background(), q)
		require.True(t, errors.Is(err, ErrInvalidQuery), "%v", err)
	}
	require.Zero(t, n.Load())
}

func TestLedgerBatchesAndDedupes(t *testing.T) {
	var mu sync.Mutex
	var queries []int
	c, _ := setup(t, time.Second, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		mu.Lock()
		queries = append(queries, len(q["idempotencyKey"])+len(q["requestId"]))
		mu.Unlock()
		// Every batch reports the same two charges, newest first.
		_, _ = io.WriteString(w, `{"entries":[
			{"requestId":"req_b","idempotencyKey":"k2","pages":1,"billedPages":1,"amountMicros":1000,"at":"2025-03-01T12:00:01Z"},
			{"requestId":"req_a","idempotencyKey":"k1","pages":1,"billedPages":1,"amountMicros":1000,"at":"2025-03-01T12:00:00Z"}]}`)
	})
	keys := make([]string, 70)
	for i := range keys {
		keys[i] = testKey
	}
	entries, err := c.Ledger(context.Background(), LedgerQuery{Keys: keys, RequestIDs: []string{"req_a", "req_b"}})
	require.NoError(t, err)
	mu.Lock()
	require.Equal(t, []int{50, 22}, queries)
	mu.Unlock()
	require.Len(t, entries, 2, "each charge once")
	require.Equal(t, "req_a", entries[0].RequestID, "ordered by time")
}
