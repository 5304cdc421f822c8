package cli

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"github.com/serpent-engine/serpent/internal/bench"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// runAuthServer starts a JetStream server whose authentication edit sets
// up, with its data in a temporary folder and fsync on every write, and
// returns its client URL.
func runAuthServer(t *testing.T, edit func(*server.Options)) string {
	t.Helper()
	opts := &server.Options{ServerName: "auth-test", Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(), SyncAlways: true}
	edit(opts)
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.ClientURL()
}

// startEngineOn runs "serpent run" against an existing NATS server (args
// say where and how to authenticate) until the test ends.
func startEngineOn(t *testing.T, env map[string]string, args ...string) *engineRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &engineRun{stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan error, 1), cancel: cancel}
	go func() {
		r.done <- Run(ctx, append(testRunArgs(), args...), func(k string) string { return env[k] }, r.stdout, r.stderr)
	}()
	// Stopped however the test ends, even if it never got ready.
	t.Cleanup(func() { r.stop(t) })
	natstest.WaitFor(t, 30*time.Second, func() error {
		select {
		case err := <-r.done:
			r.done <- nil // stopped already: nothing for the cleanup to wait for
			t.Fatalf("serpent run ended early: %v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
		default:
		}
		if !strings.Contains(r.stdout.String(), "ready with") {
			return errNotReady
		}
		return nil
	})
	return r
}

var errNotReady = os.ErrNotExist

// operatorCreds sets up decentralized (JWT) authentication: an operator,
// an account with JetStream, and a user of it. It returns the server edit
// and the user's creds file.
func operatorCreds(t *testing.T) (func(*server.Options), string) {
	t.Helper()
	op, err := nkeys.CreateOperator()
	require.NoError(t, err)
	opPub, err := op.PublicKey()
	require.NoError(t, err)
	opClaims := jwt.NewOperatorClaims(opPub)
	_, err = opClaims.Encode(op)
	require.NoError(t, err)
	sys, err := nkeys.CreateAccount()
	require.NoError(t, err)
	sysPub, err := sys.PublicKey()
	require.NoError(t, err)
	sysJWT, err := jwt.NewAccountClaims(sysPub).Encode(op)
	require.NoError(t, err)
	acc, err := nkeys.CreateAccount()
	require.NoError(t, err)
	accPub, err := acc.PublicKey()
	require.NoError(t, err)
	ac := jwt.NewAccountClaims(accPub)
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accJWT, err := ac.Encode(op)
	require.NoError(t, err)
	user, err := nkeys.CreateUser()
	require.NoError(t, err)
	userPub, err := user.PublicKey()
	require.NoError(t, err)
	seed, err := user.Seed()
	require.NoError(t, err)
	userJWT, err := jwt.NewUserClaims(userPub).Encode(acc)
	require.NoError(t, err)
	creds, err := jwt.FormatUserConfig(userJWT, seed)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "serpent.creds")
	require.NoError(t, os.WriteFile(path, creds, 0o600))
	return func(o *server.Options) {
		resolver := &server.MemAccResolver{}
		require.NoError(t, resolver.Store(accPub, accJWT))
		require.NoError(t, resolver.Store(sysPub, sysJWT))
		o.SystemAccount = sysPub
		o.TrustedOperators = []*jwt.OperatorClaims{opClaims}
		o.AccountResolver = resolver
	}, path
}

// tlsFiles are a throwaway CA, a server certificate for 127.0.0.1 and a
// client certificate, as PEM files.
type tlsFiles struct{ CA, ServerCert, ServerKey, ClientCert, ClientKey string }

func makeTLSFiles(t *testing.T) tlsFiles {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "serpent test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	caCert, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		require.NoError(t, err)
		keyDER, err := x509.MarshalECPrivateKey(key)
		require.NoError(t, err)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	}
	f := tlsFiles{CA: write("ca.pem", "CERTIFICATE", caDER)}
	f.ServerCert, f.ServerKey = leaf(2, "server", x509.ExtKeyUsageServerAuth)
	f.ClientCert, f.ClientKey = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return f
}

// TestCommandsWithNATSAuth: serpent run, schedule, status, audit and bench work
// against a server that requires creds (JWT) or TLS with a client
// certificate, given by flags or by the environment; without them they
// are refused.
func TestCommandsWithNATSAuth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T) (edit func(*server.Options), flags []string, env map[string]string)
	}{
		{"creds", func(t *testing.T) (func(*server.Options), []string, map[string]string) {
			edit, creds := operatorCreds(t)
			return edit, []string{"--nats-creds", creds}, map[string]string{"NATS_CREDS": creds}
		}},
		{"TLS client certificate", func(t *testing.T) (func(*server.Options), []string, map[string]string) {
			c := makeTLSFiles(t)
			edit := func(o *server.Options) {
				tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: c.ServerCert, KeyFile: c.ServerKey, CaFile: c.CA, Verify: true})
				require.NoError(t, err)
				o.TLSConfig, o.TLS, o.TLSVerify = tc, true, true
			}
			return edit, []string{"--nats-tls-ca", c.CA, "--nats-tls-cert", c.ClientCert, "--nats-tls-key", c.ClientKey},
				map[string]string{"NATS_CA": c.CA, "NATS_CERT": c.ClientCert, "NATS_KEY": c.ClientKey}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edit, flags, env := tt.setup(t)
			url := runAuthServer(t, edit)
			// The default retention, as the bench's own engine has: the
			// two share the streams.
			startEngineOn(t, nil, append([]string{"--nats-url", url, "--http", "", "--log-level", "warn", "--retention", "720h"}, flags...)...)

			cliAuth := func(args ...string) (string, error) {
				var stdout, stderr strings.Builder
				err := Run(context.Background(), append(args, append([]string{"--nats-url", url}, flags...)...),
					func(string) string { return "" }, &stdout, &stderr)
				return stdout.String(), err
			}
			out, err := cliAuth("schedule", "--query", "espresso scale", "--device", "mobile") // a slot of now
			require.NoError(t, err)
			job := strings.TrimSpace(out)
			require.Regexp(t, `^[0-9a-f]{32}$`, job)
			natstest.WaitFor(t, 30*time.Second, func() error {
				out, err := cliAuth("status", job)
				if err != nil {
					return err
				}
				if !strings.Contains(out, "succeeded") {
					return errNotReady
				}
				return nil
			})
			// The environment works as well as flags.
			var stdout, stderr strings.Builder
			env["NATS_URL"] = url
			require.NoError(t, Run(context.Background(), []string{"audit", "--progress=false"}, func(k string) string { return env[k] }, &stdout, &stderr))
			require.Contains(t, stdout.String(), "every promise kept")

			// bench runs its engine and phases on the same server.
			var benchOut, benchErr strings.Builder
			require.NoError(t, Run(context.Background(), append([]string{"bench", "--nats-url", url, "--phases", "raw,happy",
				"--jobs", "20", "--raw", "20", "--workers", "16", "-o", "json", "--progress=false"}, flags...),
				func(string) string { return "" }, &benchOut, &benchErr), "stderr: %s", benchErr.String())
			var rep bench.Report
			require.NoError(t, json.Unmarshal([]byte(benchOut.String()), &rep), benchOut.String())
			require.Equal(t, "existing", rep.Machine.Server)
			require.Equal(t, 20, rep.HappyPath.Finished[aggregate.StatusSucceeded])
			require.Positive(t, rep.Raw.SinglePerSec)
			require.Positive(t, rep.Raw.MemorySinglePerSec)
			require.Nil(t, rep.Raw.DiskSync, "an existing server's disk is not this machine's to measure")

			// Without them, a clear refusal.
			var none strings.Builder
			err = Run(context.Background(), []string{"status", job, "--nats-url", url}, func(string) string { return "" }, &none, &none)
			require.Error(t, err)
			require.Contains(t, err.Error(), "nats")
		})
	}
}
