package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/serpent-engine/serpent/accounts"
)

// StoredLimits is an account's value in the accounts' bucket
// (serp_accounts).
type StoredLimits struct {
	Limits accounts.Limits
	// Found is set when a value is stored (limits lifted with "accounts
	// set" are stored, as none).
	Found bool
	// Revision is the value's, for ReplaceLimits; 0 when none is stored.
	Revision uint64
	// Refused says why the value is refused; Limits are then none.
	Refused error
	// Value is the stored value, cut short.
	Value string
	// Key is the value's key.
	Key string
}

// ReadLimits reads an account's stored limits as the engines read them
// from the accounts' bucket kv.
func ReadLimits(ctx context.Context, kv Bucket, account string) (StoredLimits, error) {
	st := StoredLimits{Key: "limits." + accountKey(account)}
	value, rev, err := kv.Get(ctx, st.Key)
	if err != nil {
		return st, fmt.Errorf("account %q: %w", accountKey(account), err)
	}
	if rev == 0 {
		return st, nil
	}
	st.Found, st.Revision, st.Value = true, rev, truncate(string(value), 200)
	st.Limits, st.Refused = accounts.Decode(value)
	return st, nil
}

// ErrLimitsChanged: an account's stored limits changed since they were
// read; read them again.
var ErrLimitsChanged = errors.New("the account's limits changed meanwhile")

// ReplaceLimits stores an account's limits in the accounts' bucket kv in
// place of the value read at revision rev (0: none was stored), or fails
// with ErrLimitsChanged.
func ReplaceLimits(ctx context.Context, kv Bucket, account string, lim accounts.Limits, rev uint64) error {
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("account %q: %w", account, err)
	}
	if err := ValidateAccount(account); err != nil {
		return err
	}
	data, err := json.Marshal(lim)
	if err != nil {
		return err
	}
	_, ok, err := kv.Write(ctx, "limits."+accountKey(account), data, rev)
	if err == nil && !ok {
		return fmt.Errorf("account %q: %w", accountKey(account), ErrLimitsChanged)
	}
	return err
}

// truncate makes s fit for showing: one line, at most n bytes.
func truncate(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
