package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/accounts"
	snats "github.com/serpent-engine/serpent/nats"
)

// StoredLimits is an account's value in the bucket serp_accounts.
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

// ReadLimits reads an account's stored limits as the engines read them.
func ReadLimits(ctx context.Context, js jetstream.JetStream, account string) (StoredLimits, error) {
	st := StoredLimits{Key: "limits." + accountKey(account)}
	kv, err := js.KeyValue(ctx, snats.AccountsBucket)
	if err != nil {
		return st, fmt.Errorf("bucket %s: %w (start serpent run once to provision it)", snats.AccountsBucket, err)
	}
	e, err := kv.Get(ctx, st.Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("account %q: key %s of bucket %s: %w", accountKey(account), st.Key, snats.AccountsBucket, err)
	}
	st.Found, st.Revision, st.Value = true, e.Revision(), truncate(string(e.Value()), 200)
	st.Limits, st.Refused = accounts.Decode(e.Value())
	return st, nil
}

// ErrLimitsChanged: an account's stored limits changed since they were
// read; read them again.
var ErrLimitsChanged = errors.New("the account's limits changed meanwhile")

// ReplaceLimits stores an account's limits in place of the value read at
// revision rev (0: none was stored), or fails with ErrLimitsChanged.
func ReplaceLimits(ctx context.Context, js jetstream.JetStream, account string, lim accounts.Limits, rev uint64) error {
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("account %q: %w", account, err)
	}
	if err := ValidateAccount(account); err != nil {
		return err
	}
	kv, err := js.KeyValue(ctx, snats.AccountsBucket)
	if err != nil {
		return err
	}
	data, err := json.Marshal(lim)
	if err != nil {
		return err
	}
	key := "limits." + accountKey(account)
	if rev == 0 {
		_, err = kv.Create(ctx, key, data)
	} else {
		_, err = kv.Update(ctx, key, data, rev)
	}
	if snats.IsCASConflict(err) {
		return fmt.Errorf("account %q: %w", accountKey(account), ErrLimitsChanged)
	}
	return err
}
