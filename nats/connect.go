package nats

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
)

// ConnConfig is how serpent reaches an existing NATS server: the options a
// NATS user expects, also readable from the environment (FromEnv), from
// flags (RegisterFlags) and from a nats CLI context. Flags win over the
// environment, both over the context. Authentication is taken as a whole:
// if any of creds, nkey, user, password or token is set explicitly, the
// context's authentication is ignored; likewise for the client certificate
// and key.
type ConnConfig struct {
	// URLs of the servers; an entry may itself be a comma-separated list.
	URLs []string
	// CredsFile is a user JWT and seed file (decentralized auth).
	CredsFile string
	// NKeySeedFile holds a user nkey seed.
	NKeySeedFile string
	// User and Password authenticate together.
	User     string
	Password string
	// Token is a bearer token.
	Token string
	// TLSCA is a PEM file of CAs to trust; TLSCert and TLSKey a client
	// certificate and its key.
	TLSCA   string
	TLSCert string
	TLSKey  string
	// Context names a nats CLI context, read from
	// $XDG_CONFIG_HOME/nats/context/<name>.json (or ~/.config/...).
	Context string
	// InboxPrefix replaces _INBOX for replies.
	InboxPrefix string
	// Name is the connection name servers show; default "serpent".
	Name string
	// Logger receives disconnects, reconnects and asynchronous errors;
	// nil for none.
	Logger *slog.Logger

	getenv func(string) string
}

// Validate reports every problem of the configuration at once, after
// applying the nats CLI context if one is named.
func (c *ConnConfig) Validate() error {
	_, err := c.resolve()
	return err
}

// resolve merges the context in and checks the result.
func (c *ConnConfig) resolve() (ConnConfig, error) {
	r := *c
	var errs []error
	if c.Context != "" {
		ctx, err := loadContext(c.Context, c.env)
		if err != nil {
			errs = append(errs, err)
		} else {
			r = ctx.under(r)
		}
	}
	for _, u := range r.urls() {
		if err := checkURL(u); err != nil {
			errs = append(errs, err)
		}
	}
	if r.User != "" && r.Password == "" {
		errs = append(errs, fmt.Errorf("user %q has no password", r.User))
	}
	if r.Password != "" && r.User == "" {
		errs = append(errs, errors.New("a password is set without a user"))
	}
	if r.TLSCert != "" && r.TLSKey == "" {
		errs = append(errs, errors.New("a TLS client certificate is set without its key"))
	}
	if r.TLSKey != "" && r.TLSCert == "" {
		errs = append(errs, errors.New("a TLS client key is set without its certificate"))
	}
	var methods []string
	for _, m := range []struct {
		name string
		set  bool
	}{{"creds", r.CredsFile != ""}, {"nkey", r.NKeySeedFile != ""}, {"user/password", r.User != "" || r.Password != ""}, {"token", r.Token != ""}} {
		if m.set {
			methods = append(methods, m.name)
		}
	}
	if len(methods) > 1 {
		errs = append(errs, fmt.Errorf("choose one way to authenticate, got %s", strings.Join(methods, " and ")))
	}
	for _, f := range []struct{ what, path string }{
		{"creds file", r.CredsFile}, {"nkey seed file", r.NKeySeedFile},
		{"TLS CA file", r.TLSCA}, {"TLS certificate", r.TLSCert}, {"TLS key", r.TLSKey},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.what, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return r, fmt.Errorf("nats: connection settings: %w", err)
	}
	return r, nil
}

// urls splits the URL entries on commas.
func (c *ConnConfig) urls() []string {
	var out []string
	for _, entry := range c.URLs {
		for _, u := range strings.Split(entry, ",") {
			if u = strings.TrimSpace(u); u != "" {
				out = append(out, u)
			}
		}
	}
	return out
}

func checkURL(raw string) error {
	if !strings.Contains(raw, "://") {
		if _, _, err := net.SplitHostPort(raw); err != nil && !strings.Contains(err.Error(), "missing port") {
			// Not the parser's words: they repeat the address, secrets and all.
			return fmt.Errorf("server address %q is not host:port or a nats:// URL", redactURL(raw))
		}
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("server URL %q does not parse", redactURL(raw))
	}
	switch u.Scheme {
	case "nats", "tls", "ws", "wss":
	default:
		return fmt.Errorf("server URL %s: scheme %q is not nats, tls, ws or wss", redactURL(raw), u.Scheme)
	}
	if u.Host == "" {
		return fmt.Errorf("server URL %s has no host", redactURL(raw))
	}
	return nil
}

func (c *ConnConfig) env(k string) string {
	if c.getenv != nil {
		return c.getenv(k)
	}
	return os.Getenv(k)
}

// SyncQueueLen is the buffer of each synchronous subscription of serpent's
// connections. Every batched direct get (a job's load, a gap read) makes
// one for its replies, at most 1,000 and their end marker; the client's
// default of 65,536 made each load allocate and clear half a megabyte.
const SyncQueueLen = 2048

// Connect validates the configuration and connects. The connection
// reconnects forever, with a growing, jittered delay up to 5 s, and logs
// disconnects and reconnects.
func (c *ConnConfig) Connect() (*natsgo.Conn, error) {
	r, err := c.resolve()
	if err != nil {
		return nil, err
	}
	name := r.Name
	if name == "" {
		name = "serpent"
	}
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []natsgo.Option{
		natsgo.Name(name),
		natsgo.SyncQueueLen(SyncQueueLen),
		natsgo.MaxReconnects(-1),
		natsgo.CustomReconnectDelay(reconnectDelay),
		natsgo.DisconnectErrHandler(func(nc *natsgo.Conn, err error) {
			if err == nil && (nc.IsDraining() || nc.IsClosed()) {
				return // this process closes it
			}
			log.Warn("nats: disconnected", "server", redactURL(nc.ConnectedUrl()), "err", err)
		}),
		natsgo.ReconnectHandler(func(nc *natsgo.Conn) {
			log.Info("nats: reconnected", "server", redactURL(nc.ConnectedUrl()))
		}),
		natsgo.ClosedHandler(func(*natsgo.Conn) { log.Info("nats: connection closed") }),
		natsgo.ErrorHandler(func(_ *natsgo.Conn, _ *natsgo.Subscription, err error) {
			log.Warn("nats: asynchronous error", "err", err)
		}),
	}
	switch {
	case r.CredsFile != "":
		opts = append(opts, natsgo.UserCredentials(r.CredsFile))
	case r.NKeySeedFile != "":
		o, err := natsgo.NkeyOptionFromSeed(r.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("nats: nkey seed file %s: %w", r.NKeySeedFile, err)
		}
		opts = append(opts, o)
	case r.User != "":
		opts = append(opts, natsgo.UserInfo(r.User, r.Password))
	case r.Token != "":
		opts = append(opts, natsgo.Token(r.Token))
	}
	if r.TLSCA != "" {
		opts = append(opts, natsgo.RootCAs(r.TLSCA))
	}
	if r.TLSCert != "" {
		opts = append(opts, natsgo.ClientCert(r.TLSCert, r.TLSKey))
	}
	if r.InboxPrefix != "" {
		opts = append(opts, natsgo.CustomInboxPrefix(r.InboxPrefix))
	}
	urls := strings.Join(r.urls(), ",")
	if urls == "" {
		urls = natsgo.DefaultURL
	}
	nc, err := natsgo.Connect(urls, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats: connect to %s: %w", redactURL(urls), err)
	}
	return nc, nil
}

// reconnectDelay grows from 100 ms to 5 s, with jitter so a restarted
// server is not hit by every client at once.
func reconnectDelay(attempts int) time.Duration {
	d := min(100*time.Millisecond<<min(attempts, 6), 5*time.Second)
	return d/2 + rand.N(d/2+1)
}
