package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// Config is what an Engine needs. Store, API and Timers are required.
type Config struct {
	// Name identifies this worker in Sent events and logs; by default
	// host-pid.
	Name   string
	Store  Store
	API    API
	Timers Timers
	// Policy is the retry policy new jobs are scheduled with.
	Policy events.RetryPolicy
	// Retention is how long a job stays in the live log after its slot
	// (aggregate.State.Expires); 0 keeps jobs for ever. New jobs record it
	// in their policy. Intake refuses slots older than Retention less
	// SkewMargin (slot_expired).
	Retention time.Duration
	// SkewMargin is how far apart engines' clocks may be;
	// aggregate.DefaultSkewMargin (a day) by default.
	SkewMargin time.Duration
	// FirstSlot is the earliest slot this deployment takes: intake
	// refuses earlier ones (before_first_slot), which another deployment
	// owns. Zero takes every slot.
	FirstSlot time.Time
	// Table is the outcome table; the zero value means the default.
	Table aggregate.Table
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// IDs makes event ids and keys; NewIDs(Now) by default.
	IDs aggregate.IDs
	// ReconcileRetry is how long to wait after a failed ledger look-up.
	ReconcileRetry time.Duration
	// StoreRetry is how long to wait between tries of recording an outcome
	// while the store is unreachable.
	StoreRetry time.Duration
	// RetryDelay is how soon a delivery of a wake-up whose step failed is
	// tried again (HandleWork); a second by default.
	RetryDelay time.Duration
	Logger     *slog.Logger
	// Hooks lets tests stop the engine at the windows where a crash matters.
	Hooks Hooks
	// Accounts are the API accounts by name, beside the default API; a job
	// names its account ("" for the default). Empty: every job uses API.
	Accounts map[string]API
	// Limiter holds searches to their account's limits; nil for none.
	Limiter *Limiter
	// StarveAfter is how long a normal-priority job may be held back by its
	// account's limits before it is served like a high-priority one.
	StarveAfter time.Duration
	// Observer, if set, is told the outcome and latency of every search
	// (metrics); nil by default.
	Observer Observer
}

// Hooks are called at the points where a process may die. A hook that
// returns an error stops the step right there, as a crash would: nothing
// after it is written and the delivery is not acknowledged.
type Hooks struct {
	// AfterSchedule runs once a new job's first key is durable, before its
	// timer is armed and its command acknowledged. (A new job that intake
	// can claim at once is stored together with its claim: AfterClaim.)
	AfterSchedule func(jobID string) error
	// AfterClaim runs once Sent is durable, before the request leaves.
	AfterClaim func(jobID string) error
	// AfterSearch runs once the API answered, before the outcome is
	// appended.
	AfterSearch func(jobID string) error
	// AfterRecord runs once the outcome is appended, before the delivery
	// is acknowledged.
	AfterRecord func(jobID string) error
}

// ErrCrash is what a test hook returns to play a crash.
var ErrCrash = errors.New("engine: crash requested by a test hook")

// DefaultName is a worker's name unless told otherwise: host-pid.
func DefaultName() string {
	host, _ := os.Hostname()
	return host + "-" + strconv.Itoa(os.Getpid())
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.IDs == nil {
		c.IDs = NewIDs(c.Now)
	}
	if c.Table.Rules == nil {
		c.Table = aggregate.DefaultTable()
	}
	if c.Policy == (events.RetryPolicy{}) {
		c.Policy = aggregate.DefaultPolicy()
	}
	if c.Retention == 0 {
		c.Retention = c.Policy.Retention.D()
	}
	c.Policy.Retention = events.Duration(c.Retention)
	if c.SkewMargin <= 0 {
		c.SkewMargin = aggregate.DefaultSkewMargin
	}
	if c.ReconcileRetry == 0 {
		c.ReconcileRetry = 30 * time.Second
	}
	if c.StoreRetry == 0 {
		c.StoreRetry = 500 * time.Millisecond
	}
	if c.RetryDelay <= 0 {
		c.RetryDelay = time.Second
	}
	if c.StarveAfter == 0 {
		c.StarveAfter = time.Minute
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports every missing or contradictory setting.
func (c Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("engine: a store is required"))
	}
	if c.API == nil {
		errs = append(errs, errors.New("engine: an API client is required"))
	}
	if c.Timers == nil {
		errs = append(errs, errors.New("engine: timers are required"))
	}
	if err := aggregate.ValidatePolicy(c.Policy); err != nil {
		errs = append(errs, err)
	}
	if c.Retention < 0 {
		errs = append(errs, errors.New("engine: retention cannot be negative"))
	} else if err := aggregate.ValidateRetention(c.Retention, c.Policy, max(c.SkewMargin, 0)); err != nil {
		errs = append(errs, fmt.Errorf("engine: %w", err))
	}
	if err := c.Table.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Engine runs jobs. It is safe for concurrent use: jobs are independent,
// and the log keeps two deliveries of one job apart.
type Engine struct {
	cfg     Config
	decider aggregate.Decider
	log     *slog.Logger
	// work and commands count the deliveries of wake-ups and of schedule
	// commands this process holds back instead of arming a timer.
	work, commands holds
	// lots are the deliveries parked while their account is paused, by
	// account (park.go).
	parkMu sync.Mutex
	lots   map[string]*lot
}

// New checks the configuration and returns an engine.
func New(cfg Config) (*Engine, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Engine{cfg: cfg, decider: aggregate.Decider{Table: cfg.Table}, log: cfg.Logger.With("worker", cfg.Name),
		lots: map[string]*lot{}}, nil
}

// api returns the API of an account.
func (e *Engine) api(account string) (API, error) {
	if account == "" || account == "default" {
		if a, ok := e.cfg.Accounts["default"]; ok {
			return a, nil
		}
		return e.cfg.API, nil
	}
	if a, ok := e.cfg.Accounts[account]; ok {
		return a, nil
	}
	// An engine without accounts has the default one alone: a job naming
	// another waits for an engine that has it, rather than buy with the
	// default token outside that account's limits.
	return nil, fmt.Errorf("%w: %q", ErrUnknownAccount, account)
}

// CheckAccount says whether a job may name this API account ("" is the
// default): it is what intake refuses a command for as invalid_account.
func (e *Engine) CheckAccount(account string) error {
	_, err := e.api(account)
	return err
}

// ErrUnknownAccount: a job names an API account this engine does not have.
var ErrUnknownAccount = errors.New("engine: no such API account")

// Name is the worker name written into Sent events.
func (e *Engine) Name() string { return e.cfg.Name }

// jobLog returns the logger for lines about one job: its id and, when
// known, the first 8 characters of the current key.
func (e *Engine) jobLog(jobID string, s aggregate.State) *slog.Logger {
	l := e.log.With("job", jobID)
	if a, ok := s.Current(); ok {
		l = l.With("key", keyPrefix(a.Key))
	}
	return l
}

func keyPrefix(k string) string {
	if len(k) > 8 {
		return k[:8]
	}
	return k
}

func (e *Engine) hook(h func(string) error, jobID string) error {
	if h == nil {
		return nil
	}
	if err := h(jobID); err != nil {
		return fmt.Errorf("job %s: %w", jobID, err)
	}
	return nil
}

// expiring is ctx for an append to the job s: its messages leave the live
// log at the job's expiry, every append alike.
func expiring(ctx context.Context, s aggregate.State) context.Context {
	return eventstore.WithExpiry(ctx, s.Expires())
}

// slotExpired reports whether intake refuses a slot as slot_expired: it is
// older than the retention less the skew margin, on this engine's clock.
func (e *Engine) slotExpired(slot time.Time) bool {
	return aggregate.SlotExpired(slot, e.cfg.Now(), e.cfg.Retention, e.cfg.SkewMargin)
}

// SlotRefused reports whether intake refuses a slot, unless its job is
// live: slot_expired, or before_first_slot.
func (e *Engine) SlotRefused(slot time.Time) bool {
	_, refused := e.refusedSlot(slot)
	return refused
}

// refusedSlot is the rejection of a command for slot that has no live
// job, if intake refuses the slot: older than the horizon, or before the
// deployment's first slot.
func (e *Engine) refusedSlot(slot time.Time) (*RejectError, bool) {
	switch {
	case e.slotExpired(slot):
		return &RejectError{Reason: ReasonSlotExpired,
			Msg: fmt.Sprintf("slot %s is older than the live log keeps jobs (%s, less %s for clock skew); its observation may have been bought and archived",
				slot.Format(time.RFC3339), e.cfg.Retention, e.cfg.SkewMargin),
			Fields: []aggregate.FieldError{{Field: "slot", Message: "older than the retention horizon"}}}, true
	case !e.cfg.FirstSlot.IsZero() && slot.Before(e.cfg.FirstSlot):
		return &RejectError{Reason: ReasonBeforeFirstSlot,
			Msg: fmt.Sprintf("slot %s is before %s, the first slot this deployment takes; send it to the deployment that runs the earlier slots",
				slot.Format(time.RFC3339), e.cfg.FirstSlot.Format(time.RFC3339)),
			Fields: []aggregate.FieldError{{Field: "slot", Message: "before this deployment's first slot"}}}, true
	}
	return nil, false
}
