package serper

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// TokenEnv is the environment variable that holds the API token.
const TokenEnv = "SERPER_LIVE_TOKEN"

// ErrNoToken means neither a token file nor SERPER_LIVE_TOKEN gave a token.
var ErrNoToken = errors.New("no Serper.live token: set " + TokenEnv + " or give a token file")

// maxTokenFile bounds a token file: a token is short, a large file is the
// wrong file.
const maxTokenFile = 4096

// LoadToken returns the token from file when file is not empty, else from
// the environment variable SERPER_LIVE_TOKEN read through getenv (os.Getenv
// in production, a map in tests). Surrounding whitespace is trimmed.
func LoadToken(getenv func(string) string, file string) (string, error) {
	if file != "" {
		return TokenFromFile(file)
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	tok := strings.TrimSpace(getenv(TokenEnv))
	if tok == "" {
		return "", ErrNoToken
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("%s: %w", TokenEnv, err)
	}
	return tok, nil
}

// TokenFromFile reads a token from a file holding it alone (a trailing
// newline is fine). Errors name the file, never its content.
func TokenFromFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	if len(data) > maxTokenFile {
		return "", fmt.Errorf("token file %s is over %d bytes: is it the right file?", path, maxTokenFile)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	if err := checkToken(tok); err != nil {
		return "", fmt.Errorf("token file %s: %w", path, err)
	}
	return tok, nil
}

// minTokenLen refuses tokens too short to be real; scrubbing a two-letter
// "token" out of every message would also mangle them.
const minTokenLen = 8

// checkToken accepts the RFC 6750 b64token alphabet. Its messages describe
// the token without quoting it.
func checkToken(tok string) error {
	if tok == "" {
		return errors.New("Token is empty: set " + TokenEnv + " or use a token file")
	}
	if len(tok) < minTokenLen {
		return fmt.Errorf("Token is %d characters long, under %d: is it the right value?", len(tok), minTokenLen)
	}
	trail := strings.TrimRight(tok, "=")
	for i := 0; i < len(trail); i++ {
		c := trail[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return fmt.Errorf("Token has a character at position %d that a bearer token cannot hold (allowed: letters, digits, -._~+/ and trailing =)", i+1)
		}
	}
	if trail == "" {
		return errors.New("Token is only '=' padding")
	}
	return nil
}
