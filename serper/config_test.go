package serper

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// secret is a recognisable token: every test that could leak it looks for it.
const secret = "sk_live_SECRET_do_not_print_42"

func TestConfigValidate(t *testing.T) {
	good := Config{BaseURL: "https://api.serper.live", Token: secret}
	tests := []struct {
		name  string
		cfg   Config
		wants []string // substrings of the error; none means valid
	}{
		{"defaults", good, nil},
		{"base url with path", Config{BaseURL: "http://127.0.0.1:8790/api/", Token: secret}, nil},
		{"explicit 100 s", Config{BaseURL: good.BaseURL, Token: secret, Timeout: 100 * time.Second}, nil},
		{"90 s, the longest a search runs", Config{BaseURL: good.BaseURL, Token: secret, Timeout: 90 * time.Second},
			[]string{"Timeout 1m30s is under 1m40s", "wait at least 100 s"}},
		{"99 s", Config{BaseURL: good.BaseURL, Token: secret, Timeout: 99 * time.Second}, []string{"under 1m40s"}},
		{"short timeout", Config{BaseURL: good.BaseURL, Token: secret, Timeout: 30 * time.Second},
			[]string{"Timeout 30s is under 1m40s", "may run a search for up to 90 s"}},
		{"short timeout allowed for tests", Config{BaseURL: good.BaseURL, Token: secret, Timeout: time.Second, AllowShortTimeout: true}, nil},
		{"negative timeout", Config{BaseURL: good.BaseURL, Token: secret, Timeout: -time.Second, AllowShortTimeout: true}, []string{"negative"}},
		{"empty base url", Config{Token: secret}, []string{"BaseURL is empty"}},
		{"relative base url", Config{BaseURL: "api.serper.live", Token: secret}, []string{"not an absolute http(s) URL"}},
		{"ftp base url", Config{BaseURL: "ftp://api.serper.live", Token: secret}, []string{"not an absolute http(s) URL"}},
		{"unparsable base url", Config{BaseURL: "http://[::1", Token: secret}, []string{"not an absolute"}},
		{"base url with query", Config{BaseURL: "https://api.serper.live?x=1", Token: secret}, []string{"must not carry a query"}},
		{"base url with user info", Config{BaseURL: "https://me:" + secret + "@api.serper.live", Token: secret}, []string{"user info"}},
		{"no token", Config{BaseURL: good.BaseURL}, []string{"Token is empty", "SERPER_LIVE_TOKEN"}},
		{"short token", Config{BaseURL: good.BaseURL, Token: "abc"}, []string{"3 characters"}},
		{"token with a space", Config{BaseURL: good.BaseURL, Token: "sk_live two"}, []string{"position 8"}},
		{"token with a newline", Config{BaseURL: good.BaseURL, Token: secret + "\n"}, []string{"position 31"}},
		{"tiny body limit", Config{BaseURL: good.BaseURL, Token: secret, MaxResponseBytes: 10}, []string{"MaxResponseBytes 10"}},
		{"everything at once", Config{Timeout: time.Second, MaxResponseBytes: -1},
			[]string{"BaseURL is empty", "Token is empty", "Timeout 1s", "MaxResponseBytes -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			_, newErr := New(tt.cfg)
			if tt.wants == nil {
				require.NoError(t, err)
				require.NoError(t, newErr)
				return
			}
			require.True(t, errors.Is(err, ErrInvalidConfig))
			require.Equal(t, err.Error(), newErr.Error(), "New reports what Validate reports")
			for _, want := range tt.wants {
				require.ErrorContains(t, err, want)
			}
			require.NotContains(t, err.Error(), secret)
		})
	}
}

func TestNewAppliesDefaults(t *testing.T) {
	c, err := New(Config{BaseURL: "https://api.serper.live/", Token: secret})
	require.NoError(t, err)
	require.Equal(t, DefaultTimeout, c.Config().Timeout)
	require.Equal(t, int64(DefaultMaxResponseBytes), c.Config().MaxResponseBytes)
	require.Equal(t, "https://api.serper.live/v1/search", c.searchURL)
}

func TestConfigNeverPrintsTheToken(t *testing.T) {
	cfg := Config{BaseURL: "https://api.serper.live", Token: secret}
	c, err := New(cfg)
	require.NoError(t, err)
	requireNoToken(t, secret, cfg, &cfg, c, *c, []Config{cfg}, map[string]any{"cfg": cfg})
	require.Contains(t, cfg.String(), "[redacted]")
	require.Contains(t, Config{}.String(), "(unset)")

	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("config", "cfg", cfg, "client", c)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "cfg", cfg, "client", c)
	require.NotContains(t, buf.String(), secret)
	require.Contains(t, buf.String(), `"token":"[redacted]"`)

	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.Contains(t, string(b), `"token":"[redacted]"`)
	var back Config
	require.NoError(t, json.Unmarshal([]byte(`{"baseUrl":"https://x.example","token":"`+secret+`"}`), &back))
	require.Equal(t, secret, back.Token, "decoding still takes a token")
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == TokenEnv {
				return v
			}
			return ""
		}
	}
	tests := []struct {
		name    string
		env     string
		file    string
		want    string
		wantErr string
	}{
		{name: "env", env: "  " + secret + "\n", want: secret},
		{name: "file wins over env", env: "other_token_value", file: write("tok", secret+"\n"), want: secret},
		{name: "nothing", wantErr: "no Serper.live token"},
		{name: "empty file", file: write("empty", "\n\n"), wantErr: "is empty"},
		{name: "missing file", file: filepath.Join(dir, "nope"), wantErr: "no such file"},
		{name: "huge file", file: write("huge", strings.Repeat("a", 5000)), wantErr: "over 4096 bytes"},
		{name: "two tokens in a file", file: write("two", secret+"\n"+secret), wantErr: "position 31"},
		{name: "bad env token", env: "a b c d e f g h", wantErr: "SERPER_LIVE_TOKEN: Token has a character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadToken(env(tt.env), tt.file)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.NotContains(t, err.Error(), secret)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
	_, err := LoadToken(env(""), "")
	require.ErrorIs(t, err, ErrNoToken)
}
