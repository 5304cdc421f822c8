package nats

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// natsContext is the part of a nats CLI context file serpent uses.
type natsContext struct {
	URL         string `json:"url"`
	Creds       string `json:"creds"`
	NKey        string `json:"nkey"`
	User        string `json:"user"`
	Password    string `json:"password"`
	Token       string `json:"token"`
	Cert        string `json:"cert"`
	Key         string `json:"key"`
	CA          string `json:"ca"`
	InboxPrefix string `json:"inbox_prefix"`
}

// contextPath is where the nats CLI keeps a context.
func contextPath(name string, env func(string) string) (string, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return "", fmt.Errorf("nats context name %q is not valid", name)
	}
	dir := env("XDG_CONFIG_HOME")
	if dir == "" {
		home := env("HOME")
		if home == "" {
			var err error
			if home, err = os.UserHomeDir(); err != nil {
				return "", fmt.Errorf("nats context %s: %w", name, err)
			}
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "nats", "context", name+".json"), nil
}

func loadContext(name string, env func(string) string) (natsContext, error) {
	path, err := contextPath(name, env)
	if err != nil {
		return natsContext{}, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return natsContext{}, fmt.Errorf("nats context %s: %w", name, err)
	}
	var c natsContext
	if err := json.Unmarshal(b, &c); err != nil {
		return natsContext{}, fmt.Errorf("nats context %s (%s): %w", name, path, err)
	}
	home := env("HOME")
	for _, p := range []*string{&c.Creds, &c.NKey, &c.Cert, &c.Key, &c.CA} {
		if home != "" && strings.HasPrefix(*p, "~/") {
			*p = filepath.Join(home, (*p)[2:])
		}
	}
	return c, nil
}

// under returns explicit with the context filling what it leaves empty.
// Authentication and the client certificate are taken as a whole from one
// side.
func (n natsContext) under(explicit ConnConfig) ConnConfig {
	r := explicit
	if len(r.URLs) == 0 && n.URL != "" {
		r.URLs = []string{n.URL}
	}
	if r.CredsFile == "" && r.NKeySeedFile == "" && r.User == "" && r.Password == "" && r.Token == "" {
		r.CredsFile, r.NKeySeedFile, r.User, r.Password, r.Token = n.Creds, n.NKey, n.User, n.Password, n.Token
	}
	if r.TLSCert == "" && r.TLSKey == "" {
		r.TLSCert, r.TLSKey = n.Cert, n.Key
	}
	if r.TLSCA == "" {
		r.TLSCA = n.CA
	}
	if r.InboxPrefix == "" {
		r.InboxPrefix = n.InboxPrefix
	}
	return r
}
