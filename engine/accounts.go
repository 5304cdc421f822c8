package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/events"
)

// AccountStatus is an account as every worker shares it: its limits and
// what they hold back right now.
type AccountStatus struct {
	Account string `json:"account"`
	// Limits are those the engines apply: the stored ones, or while those
	// are refused, the ones the engines kept (as the first to report
	// tells; none if every engine reporting holds the account's purchases).
	Limits accounts.Limits `json:"limits"`
	// Refused is set while the stored limits are refused.
	Refused     *RefusedLimits `json:"refused,omitempty"`
	Day         string         `json:"day"`
	SpentToday  accounts.Spend `json:"spent_today"`
	InFlight    int            `json:"in_flight"`
	PausedUntil *time.Time     `json:"paused_until,omitempty"`
	PauseReason string         `json:"pause_reason,omitempty"`
	Waiting     int            `json:"waiting"`
	WaitingWhy  map[string]int `json:"waiting_by_reason,omitempty"`
}

// RefusedLimits is a stored value of an account's limits that the engines
// refuse, and what they do instead, as they reported it in the last
// WaitingFresh.
type RefusedLimits struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	Error string `json:"error"`
	// Holding counts the engines that hold the account's new purchases (they
	// had no limits to keep), Keeping those that keep the ones applied before.
	Holding int `json:"engines_holding"`
	Keeping int `json:"engines_keeping"`
}

// ValidateAccount checks an API account's name: "" (the default account)
// or 1 to 64 characters of [a-z0-9_-], as commands name it.
func ValidateAccount(name string) error {
	if name != "" && events.ValidateJobID(name) != nil {
		return fmt.Errorf("account name %q is not 1 to 64 characters of [a-z0-9_-]", name)
	}
	return nil
}

// SetLimits stores an account's limits in the accounts' bucket kv; every
// limiter applies them at once.
func SetLimits(ctx context.Context, kv Bucket, account string, lim accounts.Limits) error {
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
	return kv.Put(ctx, "limits."+accountKey(account), data)
}

// AccountStatuses reads every account that has limits or state in the
// accounts' bucket kv, at now.
func AccountStatuses(ctx context.Context, kv Bucket, now time.Time) ([]AccountStatus, error) {
	keys, err := kv.Keys(ctx, ">")
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
	applied := map[string][]WaitingValue{} // reports of what engines apply to refused limits
	for _, key := range keys {
		kind, rest, _ := strings.Cut(key, ".")
		name, tail, _ := strings.Cut(rest, ".")
		value, rev, err := kv.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		if rev == 0 {
			continue // deleted meanwhile
		}
		switch kind {
		case "limits":
			a := get(name)
			if a.Limits, err = accounts.Decode(value); err != nil {
				a.Refused = &RefusedLimits{Key: key, Value: truncate(string(value), 200), Error: err.Error()}
			}
		case "spend":
			if tail == day {
				_ = json.Unmarshal(value, &get(name).SpentToday)
			}
		case "slot":
			var s slotValue
			if json.Unmarshal(value, &s) == nil && now.Before(s.Until) {
				get(name).InFlight++
			}
		case "pause":
			var p pauseValue
			if json.Unmarshal(value, &p) == nil && now.Before(p.Until) {
				a := get(name)
				a.PausedUntil, a.PauseReason = &p.Until, p.Reason
			}
		case "wait":
			var w WaitingValue
			if json.Unmarshal(value, &w) == nil && now.Sub(w.At) < WaitingFresh {
				a := get(name)
				a.Waiting += w.Jobs
				for r, n := range w.ByReason {
					a.WaitingWhy[r] += n
				}
				if w.Refused != nil {
					applied[name] = append(applied[name], w)
				}
			}
		}
	}
	out := make([]AccountStatus, 0, len(byName))
	for _, a := range byName {
		if a.Refused != nil {
			a.refusedBy(applied[a.Account])
		}
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Account < out[j].Account })
	return out, nil
}

// refusedBy counts what the engines that reported apply instead of the
// account's refused limits, and shows the limits the first keeping engine
// applies.
func (a *AccountStatus) refusedBy(reports []WaitingValue) {
	sort.Slice(reports, func(i, j int) bool { return reports[i].Worker < reports[j].Worker })
	for _, w := range reports {
		if w.Refused.Held {
			a.Refused.Holding++
			continue
		}
		if a.Refused.Keeping == 0 {
			a.Limits = w.Refused.Limits
		}
		a.Refused.Keeping++
	}
}
