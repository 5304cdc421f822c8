package nats_test

import (
	"bytes"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/nats"
)

// setupAuthServer starts a plain NATS server (no JetStream) with the
// authentication edit sets up, and returns its client URL.
func setupAuthServer(t *testing.T, edit func(*server.Options)) string {
	t.Helper()
	opts := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
	edit(opts)
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestConnect(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T) (serverOpts func(*server.Options), cfg nats.ConnConfig, wrong nats.ConnConfig)
	}{
		{"user and password", func(t *testing.T) (func(*server.Options), nats.ConnConfig, nats.ConnConfig) {
			return func(o *server.Options) { o.Username, o.Password = "serpent", "s3cret" },
				nats.ConnConfig{User: "serpent", Password: "s3cret"},
				nats.ConnConfig{User: "serpent", Password: "guess"}
		}},
		{"token", func(t *testing.T) (func(*server.Options), nats.ConnConfig, nats.ConnConfig) {
			return func(o *server.Options) { o.Authorization = "t0ken" },
				nats.ConnConfig{Token: "t0ken"}, nats.ConnConfig{Token: "nope"}
		}},
		{"nkey", func(t *testing.T) (func(*server.Options), nats.ConnConfig, nats.ConnConfig) {
			pub, seed := newNKey(t)
			_, otherSeed := newNKey(t)
			return func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} },
				nats.ConnConfig{NKeySeedFile: writeFile(t, "user.nk", seed)},
				nats.ConnConfig{NKeySeedFile: writeFile(t, "other.nk", otherSeed)}
		}},
		{"creds", func(t *testing.T) (func(*server.Options), nats.ConnConfig, nats.ConnConfig) {
			edit, creds, otherCreds := operatorSetup(t)
			return edit, nats.ConnConfig{CredsFile: writeFile(t, "user.creds", creds)},
				nats.ConnConfig{CredsFile: writeFile(t, "other.creds", otherCreds)}
		}},
		{"TLS client certificate", func(t *testing.T) (func(*server.Options), nats.ConnConfig, nats.ConnConfig) {
			c := makeCerts(t)
			return func(o *server.Options) {
					tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: c.ServerCert, KeyFile: c.ServerKey, CaFile: c.CA, Verify: true})
					require.NoError(t, err)
					o.TLSConfig, o.TLS, o.TLSVerify = tc, true, true
				},
				nats.ConnConfig{TLSCA: c.CA, TLSCert: c.ClientCert, TLSKey: c.ClientKey},
				nats.ConnConfig{TLSCA: c.CA} // no client certificate
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edit, cfg, wrong := tt.setup(t)
			url := setupAuthServer(t, edit)
			cfg.URLs, wrong.URLs = []string{url}, []string{url}

			nc, err := cfg.Connect()
			require.NoError(t, err)
			require.NoError(t, nc.Flush())
			nc.Close()

			_, err = wrong.Connect()
			require.Error(t, err, "wrong credentials must be refused")
		})
	}
}

func newNKey(t *testing.T) (string, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	return pub, string(seed)
}

// operatorSetup makes an operator, an account and a user signed by it
// (decentralized JWT auth), and a second user of an unknown account.
func operatorSetup(t *testing.T) (func(*server.Options), string, string) {
	t.Helper()
	op, err := nkeys.CreateOperator()
	require.NoError(t, err)
	opPub, err := op.PublicKey()
	require.NoError(t, err)
	opClaims := jwt.NewOperatorClaims(opPub)
	_, err = opClaims.Encode(op)
	require.NoError(t, err)

	account := func() (nkeys.KeyPair, string, string) {
		acc, err := nkeys.CreateAccount()
		require.NoError(t, err)
		pub, err := acc.PublicKey()
		require.NoError(t, err)
		claims, err := jwt.NewAccountClaims(pub).Encode(op)
		require.NoError(t, err)
		return acc, pub, claims
	}
	creds := func(acc nkeys.KeyPair) string {
		pub, seed := newNKey(t)
		userJWT, err := jwt.NewUserClaims(pub).Encode(acc)
		require.NoError(t, err)
		b, err := jwt.FormatUserConfig(userJWT, []byte(seed))
		require.NoError(t, err)
		return string(b)
	}
	acc, accPub, accJWT := account()
	stranger, _, _ := account() // never told to the server
	edit := func(o *server.Options) {
		resolver := &server.MemAccResolver{}
		require.NoError(t, resolver.Store(accPub, accJWT))
		o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
		o.AccountResolver = resolver
	}
	return edit, creds(acc), creds(stranger)
}

func TestConnectWithContext(t *testing.T) {
	url := setupAuthServer(t, func(o *server.Options) { o.Username, o.Password = "ctxuser", "ctxpass" })
	home := t.TempDir()
	dir := filepath.Join(home, "nats", "context")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	ctxFile := fmt.Sprintf(`{"description":"test","url":%q,"user":"ctxuser","password":"ctxpass","color_scheme":"","inbox_prefix":"_SERPENT_INBOX"}`, url)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "serpent-test.json"), []byte(ctxFile), 0o600))
	env := func(k string) string {
		return map[string]string{"XDG_CONFIG_HOME": home, "NATS_CONTEXT": "serpent-test"}[k]
	}

	var cfg nats.ConnConfig
	cfg.FromEnv(env)
	nc, err := cfg.Connect()
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	nc.Close()

	// Explicit authentication replaces the context's as a whole.
	cfg = nats.ConnConfig{Token: "not-the-way"}
	cfg.FromEnv(env)
	_, err = cfg.Connect()
	require.Error(t, err)

	cfg = nats.ConnConfig{Context: "missing"}
	cfg.FromEnv(env)
	require.ErrorContains(t, cfg.Validate(), "missing")
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  nats.ConnConfig
		want []string // every one must be reported
	}{
		{"empty is fine", nats.ConnConfig{}, nil},
		{"url list is fine", nats.ConnConfig{URLs: []string{"nats://a:4222,tls://b:4222", "localhost:4222"}}, nil},
		{"user without password", nats.ConnConfig{User: "u"}, []string{"no password"}},
		{"password without user", nats.ConnConfig{Password: "p"}, []string{"without a user"}},
		{"cert without key", nats.ConnConfig{TLSCert: "c.pem"}, []string{"without its key", "TLS certificate"}},
		{"two ways to authenticate", nats.ConnConfig{CredsFile: "x.creds", NKeySeedFile: "x.nk", Token: "t"},
			[]string{"creds and nkey and token", "creds file", "nkey seed file"}},
		{"bad url", nats.ConnConfig{URLs: []string{"http://x:1"}}, []string{`scheme "http"`}},
		{"everything at once", nats.ConnConfig{User: "u", TLSKey: "k.pem", URLs: []string{"ftp://h"}},
			[]string{"no password", "without its certificate", "scheme", "TLS key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				require.NoError(t, err)
				return
			}
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestSecretsAreRedacted(t *testing.T) {
	cfg := nats.ConnConfig{URLs: []string{"nats://bob:hunter2@h:4222", "nats://tok3n@g:4222"}, User: "bob",
		Password: "hunter2", Token: "tok3n", CredsFile: "/secrets/user.creds"}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("connecting", "nats", cfg)
	for _, out := range []string{cfg.String(), fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg), logged.String()} {
		require.NotContains(t, out, "hunter2")
		require.NotContains(t, out, "tok3n")
		require.Contains(t, out, "REDACTED")
		require.Contains(t, out, "/secrets/user.creds")
	}
	// The errors of a failed connection do not leak them either.
	bad := nats.ConnConfig{URLs: []string{"nats://bob:hunter2@127.0.0.1:1"}}
	_, err := bad.Connect()
	require.Error(t, err)
	require.NotContains(t, err.Error(), "hunter2")
	// Nor a malformed address's error, nor a URL printed for the user.
	for _, addr := range []string{"alice:pa:ss@host:4222", "tok3n@host:4222:1"} {
		c := nats.ConnConfig{URLs: []string{addr}}
		_, err = c.Connect()
		require.Error(t, err)
		require.NotContains(t, err.Error(), "pa:ss")
		require.NotContains(t, err.Error(), "tok3n")
	}
	require.Equal(t, "nats://[REDACTED]@n2:4222", nats.RedactURL("nats://tok3n@n2:4222"))
}

func TestFlagsOverrideEnv(t *testing.T) {
	env := func(k string) string {
		return map[string]string{"NATS_URL": "nats://env:4222", "NATS_USER": "envuser", "NATS_PASSWORD": "envpass", "NATS_TOKEN": ""}[k]
	}
	for _, order := range []string{"env first", "flags first"} {
		t.Run(order, func(t *testing.T) {
			var cfg nats.ConnConfig
			fs := flag.NewFlagSet("serpent", flag.ContinueOnError)
			fs.SetOutput(new(bytes.Buffer))
			cfg.RegisterFlags(fs)
			args := []string{"--nats-url", "nats://a:4222,nats://b:4222", "--nats-user", "flaguser"}
			if order == "env first" {
				cfg.FromEnv(env)
				require.NoError(t, fs.Parse(args))
			} else {
				require.NoError(t, fs.Parse(args))
				cfg.FromEnv(env)
			}
			require.Equal(t, []string{"nats://a:4222", "nats://b:4222"}, cfg.URLs)
			require.Equal(t, "flaguser", cfg.User)
			require.Equal(t, "envpass", cfg.Password)
		})
	}
	// A way to authenticate given by flags keeps the others' variables out.
	withToken := func(k string) string {
		return map[string]string{"NATS_TOKEN": "envtok", "NATS_CERT": "/env/cert.pem"}[k]
	}
	var byFlag nats.ConnConfig
	flags := flag.NewFlagSet("serpent", flag.ContinueOnError)
	byFlag.RegisterFlags(flags)
	require.NoError(t, flags.Parse([]string{"--nats-creds", "/secrets/user.creds", "--nats-tls-key", "/k.pem"}))
	byFlag.FromEnv(withToken)
	require.Equal(t, "/secrets/user.creds", byFlag.CredsFile)
	require.Empty(t, byFlag.Token, "NATS_TOKEN is another way")
	require.Empty(t, byFlag.TLSCert, "the key's certificate is the flags' to give")

	var usage bytes.Buffer
	fs := flag.NewFlagSet("serpent", flag.ContinueOnError)
	fs.SetOutput(&usage)
	cfg := nats.ConnConfig{}
	cfg.FromEnv(env)
	cfg.RegisterFlags(fs)
	fs.PrintDefaults()
	require.NotContains(t, usage.String(), "envpass", "help never shows secrets")
	for _, f := range []string{"nats-url", "nats-creds", "nats-nkey", "nats-user", "nats-password", "nats-token", "nats-tls-ca", "nats-tls-cert", "nats-tls-key", "nats-context"} {
		require.True(t, strings.Contains(usage.String(), "-"+f), f)
	}
}
