package nats

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
)

const redacted = "[REDACTED]"

// String describes the configuration without its secrets.
func (c ConnConfig) String() string {
	var b strings.Builder
	b.WriteString("nats")
	for _, a := range c.attrs() {
		fmt.Fprintf(&b, " %s=%s", a.Key, a.Value)
	}
	return b.String()
}

// GoString is String, so %#v does not print secrets either.
func (c ConnConfig) GoString() string { return c.String() }

// LogValue logs the configuration without its secrets.
func (c ConnConfig) LogValue() slog.Value { return slog.GroupValue(c.attrs()...) }

func (c ConnConfig) attrs() []slog.Attr {
	var as []slog.Attr
	add := func(k, v string) {
		if v != "" {
			as = append(as, slog.String(k, v))
		}
	}
	urls := c.urls()
	for i, u := range urls {
		urls[i] = redactURL(u)
	}
	add("urls", strings.Join(urls, ","))
	add("context", c.Context)
	add("creds", c.CredsFile) // a path; the file's content is the secret
	add("nkey", c.NKeySeedFile)
	add("user", c.User)
	if c.Password != "" {
		add("password", redacted)
	}
	if c.Token != "" {
		add("token", redacted)
	}
	add("tls_ca", c.TLSCA)
	add("tls_cert", c.TLSCert)
	add("tls_key", c.TLSKey)
	add("inbox_prefix", c.InboxPrefix)
	add("name", c.Name)
	return as
}

// redactURL hides the user information of URLs (a user and password, or a
// token in the user's place); it takes a comma-separated list too.
// RedactURL is raw (one URL or a comma-separated list) with any user,
// password or token replaced, for printing.
func RedactURL(raw string) string { return redactURL(raw) }

func redactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		if !strings.Contains(p, "@") {
			continue
		}
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			parts[i] = redacted
			continue
		}
		parts[i] = u.Scheme + "://" + redacted + "@" + u.Host + u.Path
	}
	return strings.Join(parts, ",")
}
