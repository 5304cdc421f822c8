package serper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Client talks to one Serper.live account. It is safe for concurrent use.
type Client struct {
	cfg       Config
	http      *http.Client
	searchURL string
	ledgerURL string
	scrub     redactor
	now       func() time.Time
}

// New validates cfg, applies its defaults and returns a Client.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	transport := cfg.Transport
	if transport == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Every request goes to one host, many at once: keep their
		// connections for reuse instead of the default two per host, which
		// would open and close a connection for nearly every search.
		t.MaxIdleConns, t.MaxIdleConnsPerHost = 1024, 1024
		transport = t
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	return &Client{
		cfg: cfg,
		http: &http.Client{
			Transport: transport,
			// A redirect would turn the POST into a GET, or carry the key to
			// another host: the contract has none, so a 3xx is simply an
			// unexpected reply.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		searchURL: base + "/v1/search",
		ledgerURL: base + "/v1/billing/ledger",
		scrub:     redactor{secret: cfg.Token},
		now:       time.Now,
	}, nil
}

// Config returns the client's configuration, defaults applied. Printing it
// redacts the token.
func (c *Client) Config() Config { return c.cfg }

// Timeout is how long the client waits for one search at most.
func (c *Client) Timeout() time.Duration { return c.cfg.Timeout }

// String describes c without the token. It and Format have value
// receivers so that a dereferenced Client cannot print the token either.
func (c Client) String() string { return "serper.Client{" + c.cfg.String() + "}" }

// Format keeps every fmt verb, %+v included, away from the token field.
func (c Client) Format(f fmt.State, verb rune) { _, _ = fmt.Fprint(f, c.String()) }

// LogValue makes slog print c's configuration, token redacted.
func (c Client) LogValue() slog.Value { return c.cfg.LogValue() }

// CloseIdleConnections closes the transport's idle keep-alive connections.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

// Search sends body, byte for byte, under the attempt key and reports what
// came back. It never returns an error: every failure is an unknown Result
// (see the package doc), because none of them proves the search did not run.
//
// The exchange is bounded by Config.Timeout and by ctx, whichever ends first;
// a ctx deadline under 100 s has the same risk as a short Timeout.
//
// key must be a UUID and body not empty; otherwise nothing is sent and the
// Result is unknown with reason not_sent.
//
// One call sends the request once. Go's transport would otherwise resend
// it by itself on a fresh connection when a reused one turns out dead (a
// request with an Idempotency-Key counts as safe to replay there): the
// first may have run and been billed, and the resend's answer, a 429 say,
// would be read as the answer to a key's first send, which the engine may
// act on with a new key. A dead connection is an unknown outcome instead,
// and the engine resends the key itself, knowing it is a resend.
//
// A request not wholly written within Config.Timeout less
// Config.MaxSearchTime (10 s by default: a slow dial or TLS handshake, a
// stalled upload) is abandoned, an unknown timeout: the search it would
// start could otherwise still run after the client stopped waiting.
func (c *Client) Search(ctx context.Context, key string, body []byte) Result {
	start := time.Now()
	res := c.search(ctx, key, body)
	res.Latency = time.Since(start)
	return res
}

func (c *Client) search(ctx context.Context, key string, body []byte) Result {
	if err := checkKey(key); err != nil {
		return unknown(UnknownNotSent, c.scrub.text(err.Error()))
	}
	if len(body) == 0 {
		return unknown(UnknownNotSent, "empty request body")
	}
	if err := ctx.Err(); err != nil {
		return unknown(UnknownNotSent, "context done before sending: "+err.Error())
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	ctx, stopWatch := c.watchWrite(ctx)
	defer stopWatch()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.searchURL, bytes.NewReader(body))
	if err != nil {
		return unknown(UnknownNotSent, c.scrub.err(err).Error())
	}
	req.GetBody = nil // no resend by the transport: see Search
	req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	req.Header.Set(HeaderIdempotencyKey, key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	return c.exchange(ctx, req)
}

// errWrittenLate is why a request not written in time was abandoned.
var errWrittenLate = errors.New("the request was not written in time")

// watchWrite returns ctx with httptrace watching the request's write: if
// it is not wholly written within Timeout less MaxSearchTime, ctx is
// canceled with errWrittenLate. stop ends the watch.
func (c *Client) watchWrite(ctx context.Context) (_ context.Context, stop func()) {
	budget := c.cfg.Timeout - c.cfg.MaxSearchTime
	if budget <= 0 {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	var wrote atomic.Bool
	t := time.AfterFunc(budget, func() {
		if !wrote.Load() {
			cancel(fmt.Errorf("%w (within %v, so that its search, up to %v, ends before the client's %v wait does)",
				errWrittenLate, budget, c.cfg.MaxSearchTime, c.cfg.Timeout))
		}
	})
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Store(true) },
	})
	return ctx, func() { t.Stop(); cancel(nil) }
}

// exchange sends req, reads the reply within the limits and identifies it.
func (c *Client) exchange(ctx context.Context, req *http.Request) Result {
	resp, err := c.http.Do(req)
	if err != nil {
		if cause := context.Cause(ctx); errors.Is(cause, errWrittenLate) {
			return unknown(UnknownTimeout, cause.Error())
		}
		return unknown(transportReason(ctx, err), c.scrub.err(err).Error())
	}
	defer resp.Body.Close()
	body, reason, err := readBody(resp.Body, resp.ContentLength, c.cfg.MaxResponseBytes)
	if reason != "" {
		if reason == UnknownUnreadableBody {
			reason = transportReason(ctx, err)
			if reason == UnknownConnection {
				reason = UnknownUnreadableBody
			}
		}
		res := unknown(reason, fmt.Sprintf("HTTP %d, then: %v", resp.StatusCode, c.scrub.err(err)))
		res.RawStatus = resp.StatusCode
		res.RetryAfter = parseRetryAfter(resp.Header.Get(HeaderRetryAfter), c.now())
		return res
	}
	return identify(reply{status: resp.StatusCode, header: resp.Header, body: body}, c.now(), c.scrub)
}

// errOversized reports a body over the limit.
var errOversized = errors.New("reply body over the size limit")

// readBody reads at most limit bytes of a body whose length is size (-1
// when not told). The reason is "" on success, else oversized_body,
// truncated_body or unreadable_body.
func readBody(r io.Reader, size, limit int64) ([]byte, string, error) {
	var (
		body []byte
		err  error
	)
	if size > 0 && size <= limit {
		// One allocation, where growing as it reads takes several.
		var buf bytes.Buffer
		buf.Grow(int(size) + bytes.MinRead)
		_, err = buf.ReadFrom(io.LimitReader(r, limit+1))
		body = buf.Bytes()
	} else {
		body, err = io.ReadAll(io.LimitReader(r, limit+1))
	}
	switch {
	case int64(len(body)) > limit:
		return nil, UnknownOversizedBody, fmt.Errorf("%w (%d bytes)", errOversized, limit)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, UnknownTruncatedBody, err
	case err != nil:
		return nil, UnknownUnreadableBody, err
	}
	return body, "", nil
}

// transportReason names why an exchange ended without a complete reply.
func transportReason(ctx context.Context, err error) string {
	var nerr net.Error
	switch {
	case errors.Is(err, context.Canceled) && !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return UnknownCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(ctx.Err(), context.DeadlineExceeded),
		errors.As(err, &nerr) && nerr.Timeout():
		return UnknownTimeout
	}
	return UnknownConnection
}

// checkKey accepts the canonical 36-character UUID form the engine writes.
func checkKey(key string) error {
	if len(key) != 36 {
		return fmt.Errorf("idempotency key %q is not a UUID (36 characters)", key)
	}
	if _, err := uuid.Parse(key); err != nil {
		return fmt.Errorf("idempotency key %q is not a UUID: %v", key, err)
	}
	return nil
}
