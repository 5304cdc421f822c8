package serper

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"
)

// Defaults applied by New to zero fields.
const (
	// DefaultTimeout is what the API asks clients to wait at least.
	DefaultTimeout = 100 * time.Second
	// MinTimeout is what the API asks clients to wait at least. A search
	// may run for up to 90 s; a client deadline under that turns running
	// (and billed) searches into unknowns, and the engine counts on the
	// 10 s beyond it for a search to be over, and billed, before the
	// claim's lease ends and a reconciliation may read the ledger.
	MinTimeout = DefaultTimeout
	// DefaultMaxResponseBytes bounds how much of a reply is read.
	DefaultMaxResponseBytes = 4 << 20
	// DefaultMaxSearchTime is how long the API may run a search.
	DefaultMaxSearchTime = 90 * time.Second
	// ReplayWindow is the longest the API replays a key's first response
	// (from that key's first execution).
	ReplayWindow = 15 * time.Minute
)

// ErrInvalidConfig is wrapped by every problem Config.Validate reports.
var ErrInvalidConfig = errors.New("invalid serper config")

// Config configures a Client. The zero values of Timeout and
// MaxResponseBytes mean the defaults.
type Config struct {
	// BaseURL is the API's root, such as https://api.serper.live; the client
	// appends /v1/search and /v1/billing/ledger.
	BaseURL string `json:"baseUrl"`
	// Token is the bearer token. It is never printed: see the package doc.
	Token string `json:"token"`
	// Timeout bounds one exchange, from sending to the last byte of the reply.
	// Default 100 s; under 100 s is refused unless AllowShortTimeout is set.
	Timeout time.Duration `json:"timeout"`
	// AllowShortTimeout lifts the 100 s floor. It is for tests and the sandbox
	// demo only, where searches are known to be short; against the real API
	// it manufactures unknown outcomes.
	AllowShortTimeout bool `json:"allowShortTimeout,omitempty"`
	// MaxResponseBytes bounds a reply's body; a larger one is an unknown
	// outcome (oversized_body). Default 4 MiB.
	MaxResponseBytes int64 `json:"maxResponseBytes"`
	// MaxSearchTime is how long the API may run a search once it has the
	// request (default 90 s, the contract's). A request not wholly written
	// within Timeout less MaxSearchTime of leaving is abandoned (an unknown
	// outcome, timeout): its search, started later, could still run when
	// the client stops waiting, and the engine counts on every search a
	// send starts being over by then (see sendBy in package engine). With
	// a Timeout no longer than MaxSearchTime (AllowShortTimeout) there is
	// no such bound.
	MaxSearchTime time.Duration `json:"maxSearchTime,omitempty"`
	// Transport replaces the default HTTP transport (a clone of
	// http.DefaultTransport), for example in tests.
	Transport http.RoundTripper `json:"-"`
}

// withDefaults returns c with its zero fields set to the defaults.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.MaxSearchTime == 0 {
		c.MaxSearchTime = DefaultMaxSearchTime
	}
	return c
}

// Validate reports every problem of c, after defaults, at once. Each wraps
// ErrInvalidConfig. No message contains the token.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.BaseURL == "" {
		bad("BaseURL is empty: set the API's root URL, such as https://api.serper.live")
	} else if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad("BaseURL %q is not an absolute http(s) URL", c.baseURLHint())
	} else if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		bad("BaseURL %q must not carry a query, a fragment or user info", c.baseURLHint())
	}
	if err := checkToken(c.Token); err != nil {
		bad("%v", err)
	}
	switch {
	case c.Timeout < 0:
		bad("Timeout %v is negative", c.Timeout)
	case c.Timeout < MinTimeout && !c.AllowShortTimeout:
		bad("Timeout %v is under %v: the API may run a search for up to 90 s and asks clients to wait at least 100 s; a shorter deadline turns running, billed searches into unknown outcomes", c.Timeout, MinTimeout)
	}
	if c.MaxSearchTime < 0 {
		bad("MaxSearchTime %v is negative", c.MaxSearchTime)
	}
	if c.MaxResponseBytes < 1024 {
		bad("MaxResponseBytes %d is under 1024: no success body fits", c.MaxResponseBytes)
	}
	return errors.Join(errs...)
}

// redactURL keeps a malformed base URL readable in an error without
// quoting user info, which could hold a secret.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	if u.User != nil {
		u.User = url.User("xxxxx")
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "xxxxx", false
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = "xxxxx", ""
	}
	return u.String()
}

// baseURLHint is c's base URL as it may be printed: redacted, and never
// holding the token.
func (c Config) baseURLHint() string { return redactor{secret: c.Token}.text(redactURL(c.BaseURL)) }

// tokenHint is how the token appears anywhere Config is printed.
func (c Config) tokenHint() string {
	if c.Token == "" {
		return "(unset)"
	}
	return redacted
}

// String prints c with the token redacted.
func (c Config) String() string {
	return fmt.Sprintf("serper.Config{BaseURL: %q, Token: %s, Timeout: %v, AllowShortTimeout: %t, MaxSearchTime: %v, MaxResponseBytes: %d}",
		c.baseURLHint(), c.tokenHint(), c.Timeout, c.AllowShortTimeout, c.MaxSearchTime, c.MaxResponseBytes)
}

// GoString makes %#v redact the token too.
func (c Config) GoString() string { return c.String() }

// Format makes every fmt verb (%d and %x included, which would otherwise
// print the fields one by one) go through String.
func (c Config) Format(f fmt.State, verb rune) { _, _ = fmt.Fprint(f, c.String()) }

// LogValue makes slog print c with the token redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", c.baseURLHint()),
		slog.String("token", c.tokenHint()),
		slog.Duration("timeout", c.Timeout),
		slog.Bool("allow_short_timeout", c.AllowShortTimeout),
		slog.Duration("max_search_time", c.MaxSearchTime),
		slog.Int64("max_response_bytes", c.MaxResponseBytes),
	)
}

// MarshalJSON encodes c with the token redacted. Decoding a token from JSON
// works as usual; encoding never gives it back.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config // drops the methods, so no recursion
	p := plain(c)
	if p.Token != "" {
		p.Token = redacted
	}
	p.BaseURL = c.baseURLHint()
	return json.Marshal(p)
}
