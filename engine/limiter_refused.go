package engine

import (
	"maps"
	"slices"
	"time"

	"github.com/serpent-engine/serpent/accounts"
)

// A refused value fails closed: the account keeps the limits this limiter
// applied before, and a limiter that applied none (it started after the
// value was stored) holds the account's new purchases until the value is
// mended. Resends of keys sent before go on (they cannot buy, and a key
// must be settled before its deadline), and so do reconciliations.

type refusal struct {
	value string
	err   error
}

// Refusal is an account whose stored limits a limiter refuses.
type Refusal struct {
	Account string
	// Key is the value's key in the bucket serp_accounts.
	Key string
	// Value is the stored value, cut short.
	Value string
	Err   error
	// Held is set when the limiter had no limits of the account to keep:
	// it holds the account's new purchases. Otherwise it applies Kept.
	Held bool
	Kept accounts.Limits
}

// refusedRetry is how soon a job held back by refused limits asks again:
// a mended value is seen within it, and a delivery handed back for it may
// go to an engine that kept limits and can buy.
const refusedRetry = 2 * time.Second

// refuse records that the account's stored value is refused; l.mu is held.
func (l *Limiter) refuse(acct string, value []byte, err error) {
	l.refused[acct] = refusal{value: truncate(string(value), 200), err: err}
	key := "limits." + acct
	if _, kept := l.limits[acct]; kept {
		l.log.Error("accounts: limits in the bucket are refused; the ones applied before stay until they are mended (serpent accounts set)",
			"account", acct, "key", key, "value", l.refused[acct].value, "err", err)
		return
	}
	l.log.Error("accounts: limits in the bucket are refused and none were applied before: the account's new purchases are held until they are mended (serpent accounts set)",
		"account", acct, "key", key, "value", l.refused[acct].value, "err", err)
}

// heldLocked reports whether the account's new purchases are held: its
// stored limits are refused and none were applied before. l.mu is held.
func (l *Limiter) heldLocked(acct string) bool {
	_, refused := l.refused[acct]
	_, kept := l.limits[acct]
	return refused && !kept
}

// Refusals lists the accounts whose stored limits this limiter refuses.
func (l *Limiter) Refusals() []Refusal {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Refusal
	for _, acct := range slices.Sorted(maps.Keys(l.refused)) {
		r := l.refused[acct]
		out = append(out, Refusal{Account: acct, Key: "limits." + acct, Value: r.value, Err: r.err,
			Held: l.heldLocked(acct), Kept: l.limits[acct]})
	}
	return out
}

// Applied is what one worker applies while an account's stored limits are
// refused: the limits it applied before, or none (Held: it holds the
// account's new purchases until the value is mended).
type Applied struct {
	Held   bool            `json:"held"`
	Limits accounts.Limits `json:"limits"`
}
