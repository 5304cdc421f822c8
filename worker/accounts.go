package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
)

// AccountStatus is an account as every worker shares it: its limits and
// what they hold back right now.
type AccountStatus struct {
	Account     string          `json:"account"`
	Limits      accounts.Limits `json:"limits"`
	Day         string          `json:"day"`
	SpentToday  accounts.Spend  `json:"spent_today"`
	InFlight    int             `json:"in_flight"`
	PausedUntil *time.Time      `json:"paused_until,omitempty"`
	PauseReason string          `json:"pause_reason,omitempty"`
	Waiting     int             `json:"waiting"`
	WaitingWhy  map[string]int  `json:"waiting_by_reason,omitempty"`
}

// ValidateAccount checks an API account's name: "" (the default account)
// or 1 to 64 characters of [a-z0-9_-], as commands name it.
func ValidateAccount(name string) error {
	if name != "" && events.ValidateJobID(name) != nil {
		return fmt.Errorf("account name %q is not 1 to 64 characters of [a-z0-9_-]", name)
	}
	return nil
}

// SetLimits stores an account's limits; every limiter applies them at once.
func SetLimits(ctx context.Context, js jetstream.JetStream, account string, lim accounts.Limits) error {
	if err := lim.Validate(); err != nil {
		return fmt.Errorf("account %q: %w", account, err)
	}
	if err := ValidateAccount(account); err != nil {
		return err
	}
	acct := accountKey(account)
	kv, err := js.KeyValue(ctx, snats.AccountsBucket)
	if err != nil {
		return err
	}
	data, err := json.Marshal(lim)
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, "limits."+acct, data)
	return err
}

// AccountStatuses reads every account that has limits or state, at now.
func AccountStatuses(ctx context.Context, js jetstream.JetStream, now time.Time) ([]AccountStatus, error) {
	kv, err := js.KeyValue(ctx, snats.AccountsBucket)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	day := accounts.Day(now)
	byName := map[string]*AccountStatus{}
	get := func(name string) *AccountStatus {
		if a, ok := byName[name]; ok {
			return a
		}
		a := &AccountStatus{Account: name, Day: day, WaitingWhy: map[string]int{}}
		byName[name] = a
		return a
	}
	for key := range keys.Keys() {
		kind, rest, _ := strings.Cut(key, ".")
		name, tail, _ := strings.Cut(rest, ".")
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		switch kind {
		case "limits":
			_ = json.Unmarshal(e.Value(), &get(name).Limits)
		case "spend":
			if tail == day {
				_ = json.Unmarshal(e.Value(), &get(name).SpentToday)
			}
		case "slot":
			var s slotValue
			if json.Unmarshal(e.Value(), &s) == nil && now.Before(s.Until) {
				get(name).InFlight++
			}
		case "pause":
			var p pauseValue
			if json.Unmarshal(e.Value(), &p) == nil && now.Before(p.Until) {
				a := get(name)
				a.PausedUntil, a.PauseReason = &p.Until, p.Reason
			}
		case "wait":
			var w WaitingValue
			if json.Unmarshal(e.Value(), &w) == nil && now.Sub(w.At) < WaitingFresh {
				a := get(name)
				a.Waiting += w.Jobs
				for r, n := range w.ByReason {
					a.WaitingWhy[r] += n
				}
			}
		}
	}
	out := make([]AccountStatus, 0, len(byName))
	for _, a := range byName {
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out, nil
}
