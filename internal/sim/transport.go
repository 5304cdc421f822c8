package sim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// inProcess is an http.RoundTripper that serves each request with a handler
// in the calling goroutine: no sockets, so the real sandbox and the real
// client run inside a synctest bubble on its fake clock. What the client
// sees is what it would see over a network:
//
//   - a handler that hijacks the connection and closes it (the sandbox's
//     dropped connections) is a connection reset;
//   - a request whose context ends while the handler waits (a search
//     running longer than the client's timeout) is the client's timeout,
//     whatever the handler does afterwards.
type inProcess struct{ h http.Handler }

// errReset is what a client reads from a connection closed without a reply.
var errReset = errors.New("sim: connection reset by peer")

func (t inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	w := &recorder{header: http.Header{}}
	sreq := req.Clone(req.Context())
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "192.0.2.1:4000"
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	t.h.ServeHTTP(w, sreq)
	if req.Body != nil {
		_ = req.Body.Close()
	}
	if err := req.Context().Err(); err != nil {
		if c, ok := req.Context().Value(cutKey{}).(*cut); ok && c.fired() {
			return nil, errReset // the network cut the exchange
		}
		return nil, err // the client gave up first
	}
	if w.dropped {
		return nil, errReset
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.header,
		Body:          io.NopCloser(bytes.NewReader(w.body.Bytes())),
		ContentLength: int64(w.body.Len()),
		Request:       req,
	}, nil
}

// recorder is the server side of one in-process exchange.
type recorder struct {
	header  http.Header
	status  int
	body    bytes.Buffer
	dropped bool
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.dropped {
		return 0, errReset
	}
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// Hijack hands the handler a connection whose only use is being closed:
// the exchange ends without a reply.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	r.dropped = true
	return deadConn{}, nil, nil
}

// deadConn is a hijacked connection: closing it is all a handler does.
type deadConn struct{}

func (deadConn) Read([]byte) (int, error)         { return 0, errReset }
func (deadConn) Write(p []byte) (int, error)      { return 0, errReset }
func (deadConn) Close() error                     { return nil }
func (deadConn) LocalAddr() net.Addr              { return simAddr{} }
func (deadConn) RemoteAddr() net.Addr             { return simAddr{} }
func (deadConn) SetDeadline(time.Time) error      { return nil }
func (deadConn) SetReadDeadline(time.Time) error  { return nil }
func (deadConn) SetWriteDeadline(time.Time) error { return nil }

type simAddr struct{}

func (simAddr) Network() string { return "sim" }
func (simAddr) String() string  { return "sim" }

// cut resets the connection of one exchange at a set moment: the request
// context carries it, and cancelling that context is the reset.
type cut struct {
	mu   sync.Mutex
	done bool
}

type cutKey struct{}

func (c *cut) fire() {
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
}

func (c *cut) fired() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// withCut returns a context whose exchange is reset after d.
func withCut(ctx context.Context, d time.Duration) (context.Context, func()) {
	c := &cut{}
	ctx, cancel := context.WithCancel(context.WithValue(ctx, cutKey{}, c))
	t := time.AfterFunc(d, func() { c.fire(); cancel() })
	return ctx, func() { t.Stop(); cancel() }
}
