package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/engine/enginetest"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/stretchr/testify/require"
)

// badLimits are values of limits.<account> that the engines refuse.
var badLimits = map[string]string{
	"null":            `null`,
	"unknown-field":   `{"max_inflight":1}`,
	"wrong-type":      `{"max_in_flight":"2"}`,
	"not-json":        `{not json`,
	"negative":        `{"max_in_flight":-3}`,
	"beyond-a-bound":  `{"max_in_flight":1,"burst":150000}`,
	"a-null-field":    `{"max_in_flight":2,"daily_pages":null}`,
	"a-rate-too-slow": `{"rate_per_sec":1e-10,"daily_pages":4}`,
}

// refusedSetup is an accounts' bucket, and a way to put any value in it.
func refusedSetup(t *testing.T) (*enginetest.Bucket, func(key, value string)) {
	t.Helper()
	kv := enginetest.NewBucket()
	return kv, func(key, value string) {
		require.NoError(t, kv.Put(context.Background(), key, []byte(value)))
	}
}

// TestRefusedLimitsKeepTheOnesBefore: limits put in the bucket by hand
// that do not decode strictly (null, a misspelt field, a wrong type, a
// value out of bounds) leave the account with the limits it had: its cap
// still holds. The limiter says which account's value it refuses.
func TestRefusedLimitsKeepTheOnesBefore(t *testing.T) {
	kv, put := refusedSetup(t)
	ctx := context.Background()
	lim, err := engine.NewLimiter(ctx, kv, "w", time.Minute, nil, nil)
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	set := accounts.Limits{MaxInFlight: 1, DailyPages: 10}
	require.NoError(t, engine.SetLimits(ctx, kv, "", set))
	// Applied before the next values come: the bucket keeps one value a
	// key, so a limiter behind would never see this one.
	natstest.WaitFor(t, 10*time.Second, func() error {
		if lim.Limits("") != set {
			return fmt.Errorf("limits %+v", lim.Limits(""))
		}
		return nil
	})
	p, err := lim.Acquire(ctx, engine.Request{JobID: "running", Pages: 1})
	require.NoError(t, err)
	defer p.Unused(ctx)
	for name, value := range badLimits {
		put("limits.default", value)
		natstest.WaitFor(t, 10*time.Second, func() error {
			r := lim.Refusals()
			if len(r) != 1 || r[0].Value != value {
				return fmt.Errorf("%s: refusals %+v", name, r)
			}
			return nil
		})
		r := lim.Refusals()[0]
		require.Equal(t, "limits.default", r.Key, name)
		require.False(t, r.Held, name)
		require.Equal(t, set, r.Kept, name)
		require.Equal(t, set, lim.Limits(""), "%s: the limits applied before stay", name)
	}
	_, err = lim.Acquire(ctx, engine.Request{JobID: "next", Pages: 1})
	var te *engine.ThrottledError
	require.ErrorAs(t, err, &te, "the cap of one still holds")
	require.Equal(t, engine.WaitInFlight, te.Reason)
	require.NoError(t, engine.SetLimits(ctx, kv, "", accounts.Limits{MaxInFlight: 2}))
	natstest.WaitFor(t, 10*time.Second, func() error {
		if len(lim.Refusals()) != 0 || lim.Limits("").MaxInFlight != 2 {
			return errors.New("the mended value not applied yet")
		}
		return nil
	})

	// Limits deleted: the account has none, by the operator's word. A bad
	// value then has nothing to keep, and holds new purchases.
	_, err = kv.Delete(ctx, "limits.default", 0)
	require.NoError(t, err)
	put("limits.default", `null`)
	natstest.WaitFor(t, 10*time.Second, func() error {
		if r := lim.Refusals(); len(r) != 1 || !r[0].Held {
			return fmt.Errorf("refusals %+v", r)
		}
		return nil
	})
	_, err = lim.Acquire(ctx, engine.Request{JobID: "after-delete", Pages: 1})
	require.ErrorAs(t, err, &te, "not unlimited")
	require.Equal(t, engine.WaitRefused, te.Reason)
}

// TestRefusedLimitsAtStartHoldNewPurchases: an engine starts while the
// bucket holds a value it refuses, so it has no limits to keep: it holds
// the account's new purchases, lets resends of keys sent before go on,
// and tells which account and why (Refusals, and the accounts' status
// every engine shares). A mended value lets the purchases go on.
func TestRefusedLimitsAtStartHoldNewPurchases(t *testing.T) {
	kv, put := refusedSetup(t)
	ctx := context.Background()
	for name, value := range badLimits {
		put("limits."+name, value)
	}
	lim, err := engine.NewLimiter(ctx, kv, "w", time.Minute, nil, nil)
	require.NoError(t, err)
	t.Cleanup(lim.Close)
	require.Len(t, lim.Refusals(), len(badLimits), "read before NewLimiter returns")
	for name := range badLimits {
		_, err := lim.Acquire(ctx, engine.Request{Account: name, JobID: "new", Pages: 1})
		var te *engine.ThrottledError
		require.ErrorAs(t, err, &te, "%s: a new purchase is held", name)
		require.Equal(t, engine.WaitRefused, te.Reason, name)
		p, err := lim.Acquire(ctx, engine.Request{Account: name, JobID: "resent", Resend: true, Pages: 1, FirstSend: time.Now()})
		require.NoError(t, err, "%s: a resend cannot buy: it goes on", name)
		p.Done(ctx, true, true, 1)
	}
	for _, r := range lim.Refusals() {
		require.True(t, r.Held, r.Account)
		require.Error(t, r.Err, r.Account)
	}
	natstest.WaitFor(t, 10*time.Second, func() error {
		st, err := engine.AccountStatuses(ctx, kv, time.Now())
		if err != nil {
			return err
		}
		for _, a := range st {
			if a.Refused == nil || a.Refused.Holding != 1 || a.WaitingWhy[engine.WaitRefused] != 1 || a.Refused.Value != badLimits[a.Account] {
				return fmt.Errorf("%s: %+v %+v", a.Account, a.Refused, a.WaitingWhy)
			}
		}
		if len(st) != len(badLimits) {
			return fmt.Errorf("%d accounts", len(st))
		}
		return nil
	})

	require.NoError(t, engine.SetLimits(ctx, kv, "null", accounts.Limits{DailyPages: 5}))
	natstest.WaitFor(t, 10*time.Second, func() error {
		p, err := lim.Acquire(ctx, engine.Request{Account: "null", JobID: "new", Pages: 1})
		if err != nil {
			return err
		}
		p.Unused(ctx)
		return nil
	})
	require.Len(t, lim.Refusals(), len(badLimits)-1)
}
