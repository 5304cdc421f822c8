package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
)

// Defaults applied by New to zero fields.
const (
	// DefaultToken is the sandbox's documented, public bearer token.
	DefaultToken          = "sandbox-token"
	DefaultReplayWindow   = 15 * time.Minute
	DefaultSlowSearchTime = 110 * time.Second
	DefaultRetryAfter     = time.Second
	DefaultBillingDelay   = 30 * time.Second
	DefaultPriceMicros    = 1000
)

// ErrInvalidConfig is wrapped by every problem Config.Validate reports.
var ErrInvalidConfig = errors.New("invalid sandbox config")

// Config configures a Server. Zero fields take the defaults above; a zero
// SearchTime means searches finish at once.
type Config struct {
	// Token is the bearer token the sandbox accepts (DefaultToken if empty).
	Token string `json:"token,omitempty"`
	// Seed seeds the fault draws and the request ids.
	Seed int64 `json:"seed"`
	// ReplayWindow is how long a key's first response is replayed, from the
	// start of its execution. Default 15 minutes.
	ReplayWindow time.Duration `json:"replayWindow"`
	// SearchTime is how long a search runs. Default 0: at once.
	SearchTime time.Duration `json:"searchTime"`
	// SlowSearchTime is how long a search hit by the SlowSearch fault runs.
	SlowSearchTime time.Duration `json:"slowSearchTime"`
	// RetryAfter is the delay a 429 asks for (sent in whole seconds, at least 1).
	RetryAfter time.Duration `json:"retryAfter"`
	// BillingDelay is how long after its search ends the charge of a search
	// hit by the BillingLate fault is written to the ledger. Default 30 s.
	BillingDelay time.Duration `json:"billingDelay"`
	// FreePages are the account's free pages, used before any page is paid.
	FreePages int `json:"freePages"`
	// PriceMicros is the price of one billed page in micro-dollars.
	PriceMicros int64 `json:"priceMicros"`
	// Faults are the fault probabilities, each in [0, 1].
	Faults Faults `json:"faults"`
	// Now is the clock (default time.Now); tests inject a fake one to move
	// past the replay window without sleeping.
	Now func() time.Time `json:"-"`
	// Logger receives one debug line per request (default: discard). The
	// token is never logged.
	Logger *slog.Logger `json:"-"`
}

// Faults holds one probability per fault; the package doc says what each does.
type Faults struct {
	DropBeforeSearch      float64 `json:"dropBeforeSearch,omitempty"`
	DropAfterSearch       float64 `json:"dropAfterSearch,omitempty"`
	GatewayPage502        float64 `json:"gatewayPage502,omitempty"`
	GatewayPage504        float64 `json:"gatewayPage504,omitempty"`
	SlowSearch            float64 `json:"slowSearch,omitempty"`
	Timeout408            float64 `json:"timeout408,omitempty"`
	Failed424             float64 `json:"failed424,omitempty"`
	Unavailable503        float64 `json:"unavailable503,omitempty"`
	BillingUnavailable503 float64 `json:"billingUnavailable503,omitempty"`
	EarlyExpiry           float64 `json:"earlyExpiry,omitempty"`
	RateLimited429        float64 `json:"rateLimited429,omitempty"`
	ZeroResults           float64 `json:"zeroResults,omitempty"`
	BillingLate           float64 `json:"billingLate,omitempty"`
	FrontDoor             float64 `json:"frontDoor,omitempty"`
	LostRecord            float64 `json:"lostRecord,omitempty"`
}

// FaultFlag is one fault as serpent sandbox's command line names it.
type FaultFlag struct {
	Name string   // the flag, without its dashes: fault-408
	Help string   // what the fault does
	P    *float64 // the probability it sets
}

// Flags lists the faults as command-line flags, each setting its
// probability in f: serpent sandbox declares them, and serpent chaos
// declares them too and passes them on.
func (f *Faults) Flags() []FaultFlag {
	return []FaultFlag{
		{"fault-drop-before", "close the connection before the search runs (nothing runs)", &f.DropBeforeSearch},
		{"fault-drop-after", "run (and bill) the search, then close the connection without a reply", &f.DropAfterSearch},
		{"fault-502", "answer an HTML 502 gateway page before the search runs (nothing runs)", &f.GatewayPage502},
		{"fault-504", "run (and bill) the search, then answer an HTML 504 gateway page", &f.GatewayPage504},
		{"fault-slow", "make the search take --slow-search-time", &f.SlowSearch},
		{"fault-408", "fail the search with 408 search_timeout (not billed, replayed to the key)", &f.Timeout408},
		{"fault-424", "fail the search with 424 upstream_failed (not billed, replayed to the key)", &f.Failed424},
		{"fault-503", "fail the search with 503 service_unavailable (not billed, replayed to the key)", &f.Unavailable503},
		{"fault-billing-503", "run and bill the search, answer 503 billing_unavailable; a resend replays the 200", &f.BillingUnavailable503},
		{"fault-billing-late", "run the search, answer 503 billing_unavailable, charge it only --billing-delay later; resends get the 503 until then, the 200 after", &f.BillingLate},
		{"fault-early-expiry", "drop the cached response as soon as the search finishes", &f.EarlyExpiry},
		{"fault-429", "answer 429 rate_limited with Retry-After to a fresh key (nothing runs)", &f.RateLimited429},
		{"fault-zero-results", "return zero results (free)", &f.ZeroResults},
		{"fault-front-door", "answer 503, 408, 424 or 429 before the key is looked up, to any request (nothing runs, not replayed)", &f.FrontDoor},
		{"fault-lost-record", "lose a billed key's record: a resend runs the search again and bills it again, not replayed", &f.LostRecord},
	}
}

// probabilities lists the faults by kind, for validation and clamping.
func (f *Faults) probabilities() map[FaultKind]*float64 {
	return map[FaultKind]*float64{
		FaultDropBeforeSearch: &f.DropBeforeSearch, FaultDropAfterSearch: &f.DropAfterSearch,
		FaultGatewayPage502: &f.GatewayPage502, FaultGatewayPage504: &f.GatewayPage504,
		FaultSlowSearch: &f.SlowSearch, FaultTimeout408: &f.Timeout408, FaultFailed424: &f.Failed424,
		FaultUnavailable503: &f.Unavailable503, FaultBillingUnavailable503: &f.BillingUnavailable503,
		FaultEarlyExpiry: &f.EarlyExpiry, FaultRateLimited429: &f.RateLimited429, FaultZeroResults: &f.ZeroResults,
		FaultBillingLate: &f.BillingLate, FaultFrontDoor: &f.FrontDoor, FaultLostRecord: &f.LostRecord,
	}
}

func (c Config) withDefaults() Config {
	if c.Token == "" {
		c.Token = DefaultToken
	}
	if c.ReplayWindow == 0 {
		c.ReplayWindow = DefaultReplayWindow
	}
	if c.SlowSearchTime == 0 {
		c.SlowSearchTime = DefaultSlowSearchTime
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.BillingDelay == 0 {
		c.BillingDelay = DefaultBillingDelay
	}
	if c.PriceMicros == 0 {
		c.PriceMicros = DefaultPriceMicros
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every problem of c, after defaults, at once.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"replayWindow", c.ReplayWindow}, {"searchTime", c.SearchTime}, {"slowSearchTime", c.SlowSearchTime}, {"retryAfter", c.RetryAfter},
		{"billingDelay", c.BillingDelay}} {
		if d.v < 0 {
			bad("%s %v is negative", d.name, d.v)
		}
	}
	if c.FreePages < 0 {
		bad("freePages %d is negative", c.FreePages)
	}
	if c.PriceMicros < 0 {
		bad("priceMicros %d is negative", c.PriceMicros)
	}
	for _, kind := range FaultKinds() {
		if p := *c.Faults.probabilities()[kind]; math.IsNaN(p) || p < 0 || p > 1 {
			bad("fault %s has probability %v, want 0..1", kind, p)
		}
	}
	return errors.Join(errs...)
}

// sanitize makes an invalid config usable: New does not fail, so it clamps
// what Validate would have refused.
func (c Config) sanitize() Config {
	for _, p := range c.Faults.probabilities() {
		switch {
		case math.IsNaN(*p) || *p < 0:
			*p = 0
		case *p > 1:
			*p = 1
		}
	}
	c.ReplayWindow, c.SearchTime = max(c.ReplayWindow, 0), max(c.SearchTime, 0)
	c.SlowSearchTime, c.RetryAfter = max(c.SlowSearchTime, 0), max(c.RetryAfter, 0)
	c.BillingDelay = max(c.BillingDelay, 0)
	c.FreePages, c.PriceMicros = max(c.FreePages, 0), max(c.PriceMicros, 0)
	return c
}

// String prints c without the token, which may be a real one.
func (c Config) String() string {
	return fmt.Sprintf("sandbox.Config{Token: %s, Seed: %d, ReplayWindow: %v, SearchTime: %v, SlowSearchTime: %v, RetryAfter: %v, BillingDelay: %v, FreePages: %d, PriceMicros: %d, Faults: %+v}",
		tokenHint(c.Token), c.Seed, c.ReplayWindow, c.SearchTime, c.SlowSearchTime, c.RetryAfter, c.BillingDelay, c.FreePages, c.PriceMicros, c.Faults)
}

// Format routes every fmt verb through String.
func (c Config) Format(f fmt.State, _ rune) { _, _ = fmt.Fprint(f, c.String()) }

func tokenHint(tok string) string {
	switch tok {
	case "":
		return "(default)"
	case DefaultToken:
		return DefaultToken
	}
	return "[redacted]"
}

// configJSON is Config on the wire: durations as strings such as "15m".
type configJSON struct {
	Token          string   `json:"token,omitempty"`
	Seed           int64    `json:"seed"`
	ReplayWindow   duration `json:"replayWindow"`
	SearchTime     duration `json:"searchTime"`
	SlowSearchTime duration `json:"slowSearchTime"`
	RetryAfter     duration `json:"retryAfter"`
	BillingDelay   duration `json:"billingDelay"`
	FreePages      int      `json:"freePages"`
	PriceMicros    int64    `json:"priceMicros"`
	Faults         Faults   `json:"faults"`
}

// MarshalJSON encodes c with durations as strings and the token redacted
// (the documented DefaultToken is shown as is).
func (c Config) MarshalJSON() ([]byte, error) {
	tok := c.Token
	if tok != "" {
		tok = tokenHint(tok)
	}
	return json.Marshal(configJSON{tok, c.Seed, duration(c.ReplayWindow), duration(c.SearchTime),
		duration(c.SlowSearchTime), duration(c.RetryAfter), duration(c.BillingDelay), c.FreePages, c.PriceMicros, c.Faults})
}

// UnmarshalJSON reads durations as strings ("15m") or nanoseconds. Fields
// missing from the JSON keep their current values, as encoding/json does.
// Unknown fields are errors: a misspelt fault must not silently mean "off".
func (c *Config) UnmarshalJSON(data []byte) error {
	w := configJSON{c.Token, c.Seed, duration(c.ReplayWindow), duration(c.SearchTime), duration(c.SlowSearchTime),
		duration(c.RetryAfter), duration(c.BillingDelay), c.FreePages, c.PriceMicros, c.Faults}
	if err := decodeStrict(data, &w); err != nil {
		return err
	}
	c.Token, c.Seed, c.FreePages, c.PriceMicros, c.Faults = w.Token, w.Seed, w.FreePages, w.PriceMicros, w.Faults
	c.ReplayWindow, c.SearchTime = time.Duration(w.ReplayWindow), time.Duration(w.SearchTime)
	c.SlowSearchTime, c.RetryAfter = time.Duration(w.SlowSearchTime), time.Duration(w.RetryAfter)
	c.BillingDelay = time.Duration(w.BillingDelay)
	return nil
}

type duration time.Duration

func (d duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("duration %s: want a string such as \"15m\" or nanoseconds", b)
		}
		*d = duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = duration(v)
	return nil
}
