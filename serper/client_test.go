package serper

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const testKey = "6f1c0a52-3b1e-4e8e-9a57-6b1c2f0d8a11"

// setup starts handler behind httptest and a client for it with timeout
// (tests only: AllowShortTimeout). The returned counter counts requests.
func setup(t *testing.T, timeout time.Duration, handler http.HandlerFunc) (*Client, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		// Reading the body first lets net/http notice a client that hangs
		// up, which cancels r.Context() for handlers that stall.
		r.Body = io.NopCloser(strings.NewReader(readAll(r.Body)))
		handler(w, r)
	}))
	transport := &http.Transport{DisableKeepAlives: true}
	c, err := New(Config{BaseURL: srv.URL, Token: secret, Timeout: timeout, AllowShortTimeout: true,
		MaxResponseBytes: 2048, Transport: transport})
	require.NoError(t, err)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		transport.CloseIdleConnections()
	})
	return c, &n
}

func readAll(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}

// hangUp closes the connection without a reply.
func hangUp(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

func TestSearchSendsTheExactRequest(t *testing.T) {
	body := []byte("{ \"query\":\"espresso scale\",\n  \"limit\":10 }")
	got := make(chan *http.Request, 1)
	gotBody := make(chan []byte, 1)
	c, _ := setup(t, time.Second, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		gotBody <- b
		w.Header().Set("Idempotent-Replayed", "true")
		_, _ = io.WriteString(w, `{"requestId":"req_1","organic":[],"pages":0}`)
	})
	res := c.Search(context.Background(), testKey, body)
	r := <-got
	require.Equal(t, body, <-gotBody, "the body goes out byte for byte")
	require.Equal(t, http.MethodPost, r.Method)
	require.Equal(t, "/v1/search", r.URL.Path)
	require.Equal(t, "Bearer "+secret, r.Header.Get("Authorization"))
	require.Equal(t, testKey, r.Header.Get("Idempotency-Key"))
	require.Equal(t, "application/json", r.Header.Get("Content-Type"))
	require.True(t, res.OK())
	require.True(t, res.Replayed)
	require.Equal(t, "req_1", res.RequestID)
	require.Positive(t, res.Latency)
}

func TestSearchUnknownOutcomes(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	stall := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		reason    string
		rawStatus int
	}{
		{"hang up before the reply", func(w http.ResponseWriter, r *http.Request) { hangUp(w) }, UnknownConnection, 0},
		{"no reply in time", stall, UnknownTimeout, 0},
		{"body stalls", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			_, _ = io.WriteString(w, `{"requestId":`)
			w.(http.Flusher).Flush()
			stall(w, r)
		}, UnknownTimeout, 200},
		{"body cut short of Content-Length", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			w.WriteHeader(200)
			_, _ = io.WriteString(w, `{"requestId":"req_1"`)
			w.(http.Flusher).Flush()
			hangUp(w)
		}, UnknownTruncatedBody, 200},
		{"chunked body cut", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			_, _ = io.WriteString(w, `{"requestId":"req_1"`)
			w.(http.Flusher).Flush()
			hangUp(w)
		}, UnknownTruncatedBody, 200},
		{"oversized body", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, `{"requestId":"req_1","organic":[],"pages":0,"pad":"`+strings.Repeat("x", 3000)+`"}`)
		}, UnknownOversizedBody, 200},
		{"gateway page", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			_, _ = io.WriteString(w, "<html><body>502 Bad Gateway</body></html>")
		}, UnknownGatewayPage, 502},
		{"redirect is not followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, UnknownUnexpectedReply, 302},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, n := setup(t, 200*time.Millisecond, tt.handler)
			res := c.Search(context.Background(), testKey, []byte(`{"query":"x"}`))
			require.False(t, res.Confirmed)
			require.Equal(t, tt.reason, res.Unknown, res.Detail)
			require.Zero(t, res.Status)
			require.Equal(t, tt.rawStatus, res.RawStatus)
			require.NotEmpty(t, res.Detail)
			require.Equal(t, int32(1), n.Load(), "sent once, never followed or retried")
		})
	}
}

func TestSearchCanceledMidway(t *testing.T) {
	arrived := make(chan struct{})
	c, _ := setup(t, 10*time.Second, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	res := c.Search(ctx, testKey, []byte(`{"query":"x"}`))
	require.Equal(t, UnknownCanceled, res.Unknown)
}

func TestSearchNotSent(t *testing.T) {
	c, n := setup(t, time.Second, func(w http.ResponseWriter, r *http.Request) {})
	done, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		key  string
		body []byte
	}{
		{"empty key", context.Background(), "", []byte(`{}`)},
		{"key not a uuid", context.Background(), "attempt-1", []byte(`{}`)},
		{"key with a newline", context.Background(), testKey[:35] + "\n", []byte(`{}`)},
		{"empty body", context.Background(), testKey, nil},
		{"context already done", done, testKey, []byte(`{}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := c.Search(tt.ctx, tt.key, tt.body)
			require.Equal(t, UnknownNotSent, res.Unknown)
			require.False(t, res.Confirmed)
		})
	}
	require.Zero(t, n.Load())
}

func TestSearchConnectionRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	c, err := New(Config{BaseURL: url, Token: secret, Timeout: time.Second, AllowShortTimeout: true})
	require.NoError(t, err)
	res := c.Search(context.Background(), testKey, []byte(`{}`))
	require.Equal(t, UnknownConnection, res.Unknown)
	requireNoToken(t, secret, res)
	_, err = c.Ledger(context.Background(), LedgerQuery{Keys: []string{testKey}})
	var le *LedgerError
	require.ErrorAs(t, err, &le)
	require.True(t, le.Retryable())
	requireNoToken(t, secret, err)
	c.CloseIdleConnections()
}

// TestTheTokenNeverLeaks drives every failure path with a server that
// echoes the Authorization header back wherever it can.
func TestTheTokenNeverLeaks(t *testing.T) {
	echo := func(status int, format string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			auth := r.Header.Get("Authorization")
			w.Header().Set("X-Echo", auth)
			w.WriteHeader(status)
			_, _ = io.WriteString(w, strings.ReplaceAll(format, "AUTH", auth))
		}
	}
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{"envelope message", echo(401, `{"error":{"code":"unauthorized","message":"got AUTH","requestId":"req_1","fields":["AUTH"]}}`)},
		{"envelope request id", echo(409, `{"error":{"code":"idempotency_in_progress","requestId":"AUTH"}}`)},
		{"success body", echo(200, `{"requestId":"req_1","organic":[{"title":"AUTH"}],"pages":1}`)},
		{"gateway page", echo(502, `<html>AUTH</html>`)},
		{"plain text", echo(500, `AUTH`)},
		{"ledger body", echo(200, `{"entries":[{"requestId":"req_1","idempotencyKey":"AUTH","bodySha256":"AUTH"}]}`)},
		{"cut-off body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			_, _ = io.WriteString(w, r.Header.Get("Authorization"))
			w.(http.Flusher).Flush()
			hangUp(w)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, _ := setup(t, time.Second, tt.handler)
			res := c.Search(context.Background(), testKey, []byte(`{"query":"x"}`))
			requireNoToken(t, secret, res, res.LogValue().String())
			entries, err := c.Ledger(context.Background(), LedgerQuery{RequestIDs: []string{"req_1"}})
			requireNoToken(t, secret, entries, err)
		})
	}
}
