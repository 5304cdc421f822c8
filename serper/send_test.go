package serper_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/serper"
	"github.com/stretchr/testify/require"
)

// TestOneSendPerSearch: a key's request goes out once per Search call.
// The connection the first request of a reused keep-alive connection
// dies on is an unknown outcome, not resent by Go's transport on its
// own: the first may have run and been billed, and the resend's 429
// would read as the answer to a first send (a new key).
func TestOneSendPerSearch(t *testing.T) {
	var posts sync.Map // key -> *atomic.Int32
	count := func(key string) *atomic.Int32 {
		n, _ := posts.LoadOrStore(key, new(atomic.Int32))
		return n.(*atomic.Int32)
	}
	warm, dies := newKey(), newKey()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		key := r.Header.Get(serper.HeaderIdempotencyKey)
		if count(key).Add(1) == 1 && key == dies {
			conn, _, err := w.(http.Hijacker).Hijack() // ran, reply lost
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		if key == warm {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"requestId":"req_a","organic":[],"pages":0}`))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":{"code":"rate_limited","message":"slow down","requestId":"req_429"}}`))
	}))
	t.Cleanup(srv.Close)
	c, err := serper.New(serper.Config{BaseURL: srv.URL, Token: "sk_live_0123456789", Timeout: 5 * time.Second, AllowShortTimeout: true})
	require.NoError(t, err)
	t.Cleanup(c.CloseIdleConnections)

	require.True(t, c.Search(context.Background(), warm, espresso).OK(), "a keep-alive connection to reuse")
	res := c.Search(context.Background(), dies, espresso)
	require.EqualValues(t, 1, count(dies).Load(), "sent once")
	require.False(t, res.Confirmed, "%+v", res)
	require.Equal(t, serper.UnknownConnection, res.Unknown)
}

// TestRequestWrittenLateIsAbandoned: a request that cannot be written
// within the client's timeout less the longest search (a dial that
// takes its time) is given up as an unknown timeout before it reaches
// the API: a search it started later could run past the client's wait,
// when the engine trusts the ledger to show every charge.
func TestRequestWrittenLateIsAbandoned(t *testing.T) {
	var got atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"requestId":"req_a","organic":[],"pages":0}`))
	}))
	t.Cleanup(srv.Close)
	slow := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		// Connection set-up slower than the write budget (SYN retransmits,
		// a slow TLS handshake), well within the client's timeout.
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	t.Cleanup(slow.CloseIdleConnections)
	c, err := serper.New(serper.Config{BaseURL: srv.URL, Token: "sk_live_0123456789", Timeout: 3 * time.Second,
		MaxSearchTime: 2900 * time.Millisecond, AllowShortTimeout: true, Transport: slow})
	require.NoError(t, err)
	res := c.Search(context.Background(), newKey(), espresso)
	require.Equal(t, serper.UnknownTimeout, res.Unknown, "%+v", res)
	require.Contains(t, res.Detail, "not written in time")
	require.Zero(t, got.Load(), "the request never reached the API")

	// Written in time, the same client waits for its reply as before.
	fast, err := serper.New(serper.Config{BaseURL: srv.URL, Token: "sk_live_0123456789", Timeout: 3 * time.Second,
		MaxSearchTime: 2 * time.Second, AllowShortTimeout: true})
	require.NoError(t, err)
	t.Cleanup(fast.CloseIdleConnections)
	require.True(t, fast.Search(context.Background(), newKey(), espresso).OK())
}
