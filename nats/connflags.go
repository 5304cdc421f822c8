package nats

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strings"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// RegisterFlags binds the --nats-* flags to c. A flag given on the command
// line sets its field; values are never shown as defaults, so a password
// from the environment does not appear in -help.
func (c *ConnConfig) RegisterFlags(fs *flag.FlagSet) {
	first := true
	fs.Func("nats-url", "NATS server URLs, comma-separated (env NATS_URL); none: "+natsgo.DefaultURL, func(s string) error {
		if first {
			c.URLs, first = nil, false
		}
		c.URLs = append(c.URLs, strings.Split(s, ",")...)
		return nil
	})
	str := func(name, usage string, p *string) {
		fs.Func(name, usage, func(s string) error { *p = s; return nil })
	}
	str("nats-creds", "NATS user credentials file (env NATS_CREDS)", &c.CredsFile)
	str("nats-nkey", "NATS user nkey seed file (env NATS_NKEY)", &c.NKeySeedFile)
	str("nats-user", "NATS user (env NATS_USER)", &c.User)
	str("nats-password", "NATS password (env NATS_PASSWORD)", &c.Password)
	str("nats-token", "NATS token (env NATS_TOKEN)", &c.Token)
	str("nats-tls-ca", "PEM file of CAs to trust for NATS TLS (env NATS_CA)", &c.TLSCA)
	str("nats-tls-cert", "TLS client certificate for NATS (env NATS_CERT)", &c.TLSCert)
	str("nats-tls-key", "TLS client key for NATS (env NATS_KEY)", &c.TLSKey)
	str("nats-context", "nats CLI context to read the settings from (env NATS_CONTEXT)", &c.Context)
}

// FromEnv fills the fields still empty from NATS_URL, NATS_CREDS,
// NATS_NKEY, NATS_USER, NATS_PASSWORD, NATS_TOKEN, NATS_CA, NATS_CERT,
// NATS_KEY, NATS_CONTEXT and NATS_INBOX_PREFIX; so flags, parsed before or
// after, win. A way to authenticate given by flags (creds, nkey, user and
// password, or token) keeps the variables of the other ways out, and a
// client certificate or key given by flags keeps NATS_CERT and NATS_KEY
// out. env also serves to find the nats CLI context
// folder (XDG_CONFIG_HOME, HOME).
func (c *ConnConfig) FromEnv(env func(string) string) {
	c.getenv = env
	if len(c.URLs) == 0 {
		if u := env("NATS_URL"); u != "" {
			c.URLs = strings.Split(u, ",")
		}
	}
	// The way to authenticate the flags chose, if any: the variables of
	// the other ways stay out (the other half of a user and password may
	// still come from the environment).
	creds, nkey, userPass, token := c.CredsFile != "", c.NKeySeedFile != "", c.User != "" || c.Password != "", c.Token != ""
	cert := c.TLSCert != "" || c.TLSKey != ""
	for _, f := range []struct {
		p    *string
		key  string
		skip bool
	}{
		{&c.CredsFile, "NATS_CREDS", nkey || userPass || token}, {&c.NKeySeedFile, "NATS_NKEY", creds || userPass || token},
		{&c.User, "NATS_USER", creds || nkey || token}, {&c.Password, "NATS_PASSWORD", creds || nkey || token},
		{&c.Token, "NATS_TOKEN", creds || nkey || userPass}, {&c.TLSCA, "NATS_CA", false},
		{&c.TLSCert, "NATS_CERT", cert}, {&c.TLSKey, "NATS_KEY", cert}, {&c.Context, "NATS_CONTEXT", false},
		{&c.InboxPrefix, "NATS_INBOX_PREFIX", false},
	} {
		if *f.p == "" && !f.skip {
			*f.p = env(f.key)
		}
	}
}

// RegisterFlagsOrEmbed binds the --nats-* flags of a command that runs an
// embedded server when no NATS URL is given.
func (c *ConnConfig) RegisterFlagsOrEmbed(fs *flag.FlagSet) {
	c.RegisterFlags(fs)
	fs.Lookup("nats-url").Usage = "NATS server URLs, comma-separated (env NATS_URL); none runs an embedded server"
}

// Given reports whether the flags or env say where an existing NATS is.
func (c *ConnConfig) Given(env func(string) string) bool {
	c.FromEnv(env)
	return len(c.URLs) > 0 || c.Context != ""
}

// ErrConnConfig wraps what Dial finds wrong in the settings themselves:
// the caller's mistake, not the server's.
var ErrConnConfig = errors.New("nats: connection settings")

// Dial connects with the flags, then env, then the nats CLI context, and
// returns a JetStream handle. name is the connection's name; log, if not
// nil, receives disconnects and reconnects.
func (c *ConnConfig) Dial(env func(string) string, log *slog.Logger, name string) (*natsgo.Conn, jetstream.JetStream, error) {
	c.FromEnv(env)
	c.Name, c.Logger = name, log
	if err := c.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrConnConfig, err)
	}
	nc, err := c.Connect()
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}
