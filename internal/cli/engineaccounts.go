package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// startAccounts makes a client for every account of the --accounts file
// (the default API serves "default" unless the file names it), and the
// limiter that holds every account to its limits. Limits given in the file
// are stored only for accounts that have none yet, so a limit changed with
// "serpent accounts set" is not undone by a restart.
func (f *engineFlags) startAccounts(ctx context.Context, env func(string) string, js jetstream.JetStream, def *serper.Client,
	now func() time.Time, log *slog.Logger, say func(string, ...any), cleanup *[]func()) (map[string]engine.API, *engine.Limiter, error) {
	kv, err := snats.OpenKV(ctx, js, snats.AccountsBucket)
	if err != nil {
		return nil, nil, err
	}
	lim, err := engine.NewLimiter(ctx, kv, f.workerName(), f.policy.Lease.D(), now, log)
	if err != nil {
		return nil, nil, err
	}
	*cleanup = append(*cleanup, lim.Close)
	if f.accountsFile == "" {
		return nil, lim, nil
	}
	defs, err := readAccounts(f.accountsFile)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]engine.API{"default": def}
	for _, d := range defs {
		client := def
		if d.BaseURL != "" || d.TokenEnv != "" || d.TokenFile != "" {
			cfg := def.Config()
			if d.BaseURL != "" && d.BaseURL != cfg.BaseURL && d.TokenEnv == "" && d.TokenFile == "" {
				// The default account's token is for the default API.
				return nil, nil, fmt.Errorf("%w: account %q: base_url %s needs a token of its own (token_env or token_file): the default account's token is not sent to another address",
					errUsage, d.Name, hostOf(d.BaseURL))
			}
			// The default's own sandbox (--sandbox-url) is not another address.
			elsewhere := d.BaseURL != "" && d.BaseURL != cfg.BaseURL
			if d.BaseURL != "" {
				cfg.BaseURL = d.BaseURL
			}
			realAPI := cfg.AllowShortTimeout && elsewhere && !onLoopback(d.BaseURL)
			if realAPI {
				// The default is a sandbox; this account is an API elsewhere
				// with its own token: the real API's rules hold for it.
				cfg.AllowShortTimeout = false
				if err := f.checkRealAPI(); err != nil {
					return nil, nil, fmt.Errorf("account %q: %w", d.Name, err)
				}
			}
			switch {
			case d.TokenFile != "":
				if cfg.Token, err = serper.TokenFromFile(d.TokenFile); err != nil {
					return nil, nil, fmt.Errorf("%w: account %q: %v", errUsage, d.Name, err)
				}
			case d.TokenEnv != "":
				if cfg.Token = env(d.TokenEnv); cfg.Token == "" {
					return nil, nil, fmt.Errorf("%w: account %q: $%s is empty", errUsage, d.Name, d.TokenEnv)
				}
			}
			if err := tokenTransport(cfg.BaseURL); err != nil && cfg.Token != sandbox.DefaultToken {
				return nil, nil, fmt.Errorf("%w: account %q: %v", errUsage, d.Name, err)
			}
			if client, err = serper.New(cfg); err != nil {
				return nil, nil, fmt.Errorf("%w: account %q: %v", errUsage, d.Name, err)
			}
			*cleanup = append(*cleanup, client.CloseIdleConnections)
			if realAPI {
				// Not "nothing is bought", as the sandbox's line says.
				say("account %s: API %s (real searches are bought)", d.Name, hostOf(cfg.BaseURL))
			}
		}
		out[d.Name] = client
		if d.limits != nil {
			if err := storeFileLimits(ctx, kv, d.Name, *d.limits, log); err != nil {
				return nil, nil, err
			}
		}
	}
	say("%d API accounts: %s", len(out), accountNames(out))
	return out, lim, nil
}

// storeFileLimits stores an account's limits from the --accounts file if
// it has none stored, or if the stored ones are refused (with a warning
// that names them): a refused value would hold the account's purchases.
func storeFileLimits(ctx context.Context, kv engine.Bucket, account string, lim accounts.Limits, log *slog.Logger) error {
	for range 3 {
		stored, err := engine.ReadLimits(ctx, kv, account)
		if err != nil {
			return err
		}
		if stored.Found && stored.Refused == nil {
			return nil // set with "serpent accounts set", say: not undone by a restart
		}
		if stored.Refused != nil {
			log.Warn("accounts: the stored limits are refused; overwritten with those of the --accounts file", "account", account,
				"bucket", snats.AccountsBucket, "key", stored.Key, "value", stored.Value, "err", stored.Refused)
		}
		err = engine.ReplaceLimits(ctx, kv, account, lim, stored.Revision)
		if !errors.Is(err, engine.ErrLimitsChanged) {
			return err
		}
	}
	return fmt.Errorf("account %q: key limits.%s of bucket %s kept changing as the --accounts file's limits were stored", account, account, snats.AccountsBucket)
}

func accountNames(m map[string]engine.API) string {
	return strings.Join(slices.Sorted(maps.Keys(m)), ", ")
}

// workerName is the engine's --name, or the name it gives itself.
func (f *engineFlags) workerName() string {
	if f.name == "" {
		return engine.DefaultName()
	}
	return f.name
}
