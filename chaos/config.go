package chaos

import (
	"errors"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// Config is one chaos run. DefaultConfig is the CI-sized run.
type Config struct {
	// Jobs is the number of distinct observations ordered; Duplicates the
	// share of them published twice (in another spelling); Malformed the
	// number of bad commands published alongside.
	Jobs       int
	Duplicates float64
	Malformed  int
	// Spread is the span over which slots fall (jobs wait for their slot
	// on a timer) and PublishFor how long publishing takes.
	Spread, PublishFor time.Duration

	// Workers is the number of serpent run processes, Slots the jobs each
	// handles at once.
	Workers, Slots int
	// Seed drives the sandbox's faults and the orchestrator's choices.
	Seed int64
	// Faults are the sandbox's fault probabilities.
	Faults sandbox.Faults
	// SearchTime and SlowSearchTime are the sandbox's; ReplayWindow is the
	// sandbox's and the engine's.
	SearchTime, SlowSearchTime, ReplayWindow time.Duration
	// Engine settings (serpent run flags).
	ClientTimeout, Lease, AckWait, SafetyMargin, BaseDelay, MaxDelay time.Duration

	// Chaos: how often (on average) a worker is killed (SIGKILL), paused
	// (SIGSTOP for between PauseMin and PauseMax, past its lease) or the
	// NATS server restarted (SIGKILL or SIGTERM). Zero turns a kind off.
	KillEvery, PauseEvery, NATSRestartEvery time.Duration
	PauseMin, PauseMax                      time.Duration
	// ChaosFor bounds the phase with faults; then every job must finish
	// within Settle (promise 5).
	ChaosFor, Settle time.Duration

	// Retention, if set, is the workers' retention horizon (serpent run
	// --retention), with MaxAge and SkewMargin as their --max-age and
	// --skew-margin: jobs leave the live log during the run, and the
	// checks read them from SERP_ARCHIVE.
	Retention, MaxAge, SkewMargin time.Duration

	// Naive runs the anti-pattern worker (a fresh key per delivery) against
	// a sandbox with the same faults and seed, for comparison; NaiveCrash
	// is the share of its deliveries that die before their acknowledgement.
	Naive      bool
	NaiveJobs  int
	NaiveCrash float64

	// Binary is the serpent binary (see Binary); Dir keeps the data and
	// the logs (a temporary folder if empty); Keep leaves Dir in place.
	Binary string
	Dir    string
	Keep   bool
}

// DefaultFaults is the sandbox's fault mix of a chaos run: every fault of
// the sandbox, often enough that a thousand jobs meet each many times.
func DefaultFaults() sandbox.Faults {
	return sandbox.Faults{
		DropBeforeSearch: 0.04, DropAfterSearch: 0.06, GatewayPage502: 0.03, GatewayPage504: 0.03,
		SlowSearch: 0.02, Timeout408: 0.04, Failed424: 0.02, Unavailable503: 0.02,
		BillingUnavailable503: 0.03, EarlyExpiry: 0.03, RateLimited429: 0.02, ZeroResults: 0.04,
		FrontDoor: 0.03, LostRecord: 0.05,
	}
}

// DefaultConfig is the CI-sized run: a thousand jobs over a minute and a
// half, three workers, about two minutes in all. Its timings are the real
// ones scaled down: a search runs for 20 ms (a slow one 1.5 s, within the
// 2 s the client waits), the lease is 3 s, keys are replayed for 20 s with
// 6 s kept free at the end. A worker is killed every 5 s and frozen past
// its lease every 8 s, the NATS server restarted every 20 s, on average.
func DefaultConfig() Config {
	return Config{
		Jobs: 1000, Duplicates: 0.1, Malformed: 50,
		Spread: 90 * time.Second, PublishFor: 60 * time.Second,
		Workers: 3, Slots: 16, Seed: 1,
		Faults:     DefaultFaults(),
		SearchTime: 20 * time.Millisecond, SlowSearchTime: 1500 * time.Millisecond, ReplayWindow: 20 * time.Second,
		ClientTimeout: 2 * time.Second, Lease: 3 * time.Second, AckWait: 2 * time.Second,
		SafetyMargin: 6 * time.Second, BaseDelay: 50 * time.Millisecond, MaxDelay: time.Second,
		KillEvery: 5 * time.Second, PauseEvery: 8 * time.Second, NATSRestartEvery: 20 * time.Second,
		PauseMin: 4 * time.Second, PauseMax: 7 * time.Second,
		ChaosFor: 3 * time.Minute, Settle: 3 * time.Minute,
		Naive: true, NaiveJobs: 1000, NaiveCrash: 0.05,
	}
}

// Validate reports every setting a run cannot work with.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("chaos: "+format, args...)) }
	if c.Jobs < 1 || c.Workers < 1 || c.Slots < 1 {
		bad("at least one job, one worker and one slot")
	}
	if c.Duplicates < 0 || c.Duplicates > 1 || c.Malformed < 0 {
		bad("duplicates must be a share in 0..1 and malformed not negative")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"client timeout", c.ClientTimeout}, {"lease", c.Lease}, {"ack wait", c.AckWait}, {"replay window", c.ReplayWindow},
		{"base delay", c.BaseDelay}, {"max delay", c.MaxDelay}, {"settle", c.Settle}} {
		if d.v <= 0 {
			bad("%s must be positive", d.name)
		}
	}
	if c.SafetyMargin >= c.ReplayWindow {
		bad("safety margin %s must be shorter than the replay window %s", c.SafetyMargin, c.ReplayWindow)
	}
	if c.Lease <= c.ClientTimeout {
		bad("lease %s must be longer than the client timeout %s, or a running request could be sent again at once", c.Lease, c.ClientTimeout)
	}
	if c.PauseEvery > 0 && (c.PauseMin <= 0 || c.PauseMax < c.PauseMin) {
		bad("pauses need 0 < pause min <= pause max")
	}
	if c.Naive && (c.NaiveJobs < 1 || c.NaiveCrash < 0 || c.NaiveCrash >= 1) {
		bad("the naive comparison needs jobs and a crash share in 0..1")
	}
	if c.Retention > 0 {
		p := aggregate.DefaultPolicy()
		p.MaxAge = events.Duration(c.MaxAge)
		if c.MaxAge <= 0 || c.SkewMargin <= 0 {
			bad("a retention needs a positive max age and skew margin")
		} else if err := aggregate.ValidateRetention(c.Retention, p, c.SkewMargin); err != nil {
			bad("%v", err)
		}
	}
	if err := (sandbox.Config{Faults: c.Faults}).Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// sandboxConfig is the sandbox of the run (and of the naive comparison).
func (c Config) sandboxConfig() sandbox.Config {
	return sandbox.Config{Seed: c.Seed, ReplayWindow: c.ReplayWindow, SearchTime: c.SearchTime,
		SlowSearchTime: c.SlowSearchTime, RetryAfter: time.Second, Faults: c.Faults}
}
