package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// Config is one simulated world: the jobs, the engine's settings, the
// provider's fault mix, and the faults the scheduler injects around the
// engine. RandomConfig draws one from a seed.
type Config struct {
	// Seed drives every choice: the scheduler, the sandbox's fault draws,
	// the ids.
	Seed uint64
	// Jobs is the number of distinct observations ordered.
	Jobs int
	// Duplicates is the share of jobs whose command is published twice
	// (the second time in another, equivalent spelling); Malformed is the
	// number of bad commands published alongside.
	Duplicates float64
	Malformed  int
	// Spread is the span over which slots fall and commands are published.
	Spread time.Duration
	// Ahead, if set, publishes every valid command at least this long
	// before its slot: the intake must store each job and arm its timer,
	// and nothing may be bought before the slot. Zero: a command is
	// published at any time of the spread, before or after its slot.
	Ahead time.Duration

	// Workers are the simulated processes; each takes Slots due jobs and
	// IntakeSlots commands at once.
	Workers, Slots, IntakeSlots int
	Policy                      events.RetryPolicy
	ClientTimeout               time.Duration
	// AckWait is the work and intake consumers' ack wait; RetryDelay the
	// delay of a negative acknowledgement.
	AckWait, RetryDelay time.Duration
	// ServerAhead is how far the NATS server's clock, which stamps the
	// messages it stores and fires the timers, runs ahead of the workers'
	// (which is the provider's too). Engines read the server's clock in
	// production, to within a round trip; a timer then fires that much
	// early, and the engine's skew correction must take it.
	ServerAhead time.Duration
	// Sandbox configures the provider (Now, Token and Logger are the
	// world's).
	Sandbox sandbox.Config

	// Faults are what the scheduler injects around the engine; they stop
	// at FaultsFor after the start. Afterwards every job must be finished
	// within Settle (promise 5).
	Faults    Faults
	FaultsFor time.Duration
	Settle    time.Duration

	// Retention, if set, is the engines' retention horizon: jobs leave
	// the live log this long after their slot, and the checks read them
	// from the store's archive (memstore's History). SkewMargin is the
	// engines' clock skew margin; it must be set with Retention.
	Retention, SkewMargin time.Duration

	// Label names the kind of world in reports.
	Label string
	// Trace names a job whose scheduling, requests and log the report
	// prints in full (Report.Trace), to see how a failure came about.
	Trace string
}

// Faults are probabilities, each drawn when the scheduler resumes a task
// at a point where it applies.
type Faults struct {
	// Crash: the worker process dies here (every task it runs stops where
	// it is); it comes back after up to RestartAfter.
	Crash        float64
	RestartAfter time.Duration
	// Pause: the worker process freezes (SIGSTOP, a long GC, a VM
	// migration) for up to MaxPause. A pause that catches a task between
	// its last check and the request leaving lasts at most MaxSendPause:
	// serpent's safety margin is what makes such a pause harmless, and
	// LongSendPauses lifts the bound to show what happens past it.
	Pause          float64
	MaxPause       time.Duration
	MaxSendPause   time.Duration
	LongSendPauses bool
	// StoreFail: an append or load fails with nothing written.
	// StoreLost: an append is written but its reply is lost
	// (eventstore.ErrUnknownOutcome).
	StoreFail, StoreLost float64
	// LedgerFail: a billing ledger look-up fails.
	LedgerFail float64
	// Cut: the connection of a search request is reset at a random moment
	// of the exchange, while the API may still be running the search (a
	// middlebox, a network blip). The search goes on, and is billed.
	Cut float64
	// ArmFail: arming a timer fails.
	ArmFail float64
	// AckLost and AckLate: an acknowledgement never arrives, or arrives
	// after up to 3 ack waits (the message may be redelivered meanwhile).
	AckLost, AckLate float64
	// Duplicate: a delivery is also handed to a second worker at once.
	Duplicate float64
	// KeepAliveLost: a delivery's keep-alives never reach the server, so a
	// long request lets the message go to another worker.
	KeepAliveLost float64
}

// Validate reports every setting a world cannot run with.
func (c Config) Validate() error {
	var errs []error
	if c.Jobs < 1 {
		errs = append(errs, errors.New("sim: at least one job"))
	}
	if c.Workers < 1 || c.Slots < 1 || c.IntakeSlots < 1 {
		errs = append(errs, errors.New("sim: at least one worker, one slot and one intake slot"))
	}
	if err := aggregate.ValidatePolicy(c.Policy); err != nil {
		errs = append(errs, err)
	}
	if c.ClientTimeout <= 0 || c.AckWait <= 0 || c.RetryDelay <= 0 || c.Spread <= 0 || c.Settle <= 0 {
		errs = append(errs, errors.New("sim: client timeout, ack wait, retry delay, spread and settle must be positive"))
	}
	if c.Ahead < 0 || c.ServerAhead < 0 {
		errs = append(errs, errors.New("sim: ahead and server ahead must not be negative"))
	}
	if c.Sandbox.ReplayWindow != 0 && c.Sandbox.ReplayWindow < c.Policy.ReplayWindow.D() {
		errs = append(errs, fmt.Errorf("sim: the sandbox replays keys for %s, less than the policy's window %s: the provider would break its contract",
			c.Sandbox.ReplayWindow, c.Policy.ReplayWindow.D()))
	}
	if c.Retention > 0 {
		if c.SkewMargin <= 0 {
			errs = append(errs, errors.New("sim: a retention needs a skew margin"))
		} else if err := aggregate.ValidateRetention(c.Retention, c.Policy, c.SkewMargin); err != nil {
			errs = append(errs, fmt.Errorf("sim: %w", err))
		}
	}
	if err := c.Sandbox.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// RandomConfig draws a world from seed: how many workers and slots, how
// stormy the provider and the processes are, how tight the budgets. Every
// seed is a valid world within the provider's contract and the engine's
// documented settings: searches end within 90 s, the client waits 100 s,
// the lease covers the client timeout, the provider's window is the
// policy's, and a process pause between the engine's last check and the
// request leaving is short enough that the request, plus the longest
// search, ends within the lease. BeyondContract lifts the first and the
// last (see there). In two worlds in five the NATS server's clock runs
// ahead of the workers' (20 ms, or 1.2 s as after a slow round trip), so
// timers fire early.
func RandomConfig(seed uint64, jobs int) Config {
	r := rand.New(rand.NewPCG(seed, 0x5e1f))
	pick := func(xs ...float64) float64 { return xs[r.IntN(len(xs))] }
	dur := func(xs ...time.Duration) time.Duration { return xs[r.IntN(len(xs))] }

	p := aggregate.DefaultPolicy()
	if r.IntN(4) == 0 { // tight budgets reach the failure paths
		p.MaxKeys = 1 + r.IntN(3)
		p.MaxAge = events.Duration(dur(20*time.Minute, 45*time.Minute, 2*time.Hour))
	}
	storm := pick(0, 0.5, 1, 1, 2, 3)
	f := func(p float64) float64 { return min(p*storm, 0.5) }
	sb := sandbox.Config{
		Seed:           int64(seed),
		ReplayWindow:   p.ReplayWindow.D(),
		SearchTime:     dur(0, 0, time.Second, 5*time.Second),
		SlowSearchTime: dur(30*time.Second, 85*time.Second),
		RetryAfter:     dur(time.Second, 30*time.Second),
		Faults: sandbox.Faults{
			DropBeforeSearch: f(0.04), DropAfterSearch: f(0.06), GatewayPage502: f(0.03), GatewayPage504: f(0.03),
			SlowSearch: f(0.02), Timeout408: f(0.04), Failed424: f(0.02), Unavailable503: f(0.02),
			BillingUnavailable503: f(0.03), EarlyExpiry: f(0.03), RateLimited429: f(0.02), ZeroResults: f(0.04),
			FrontDoor: f(0.03), LostRecord: f(0.05),
		},
	}
	crash := pick(0, 0.002, 0.005, 0.01, 0.02)
	clientTimeout := 100 * time.Second
	return Config{
		Seed: seed, Jobs: jobs, Duplicates: 0.1, Malformed: max(1, jobs/50),
		Spread:  dur(10*time.Minute, time.Hour),
		Workers: 2 + r.IntN(3), Slots: 2 + r.IntN(5), IntakeSlots: 1 + r.IntN(2),
		Policy: p, ClientTimeout: clientTimeout,
		AckWait: dur(10*time.Second, 30*time.Second), RetryDelay: time.Second,
		Sandbox: sb,
		Faults: Faults{
			Crash: crash, RestartAfter: dur(5*time.Second, time.Minute),
			Pause: crash, MaxPause: 2 * p.Lease.D(),
			MaxSendPause: min(p.SafetyMargin.D()/4, p.Lease.D()-sb.SlowSearchTime-5*time.Second),
			StoreFail:    f(0.01), StoreLost: f(0.01), LedgerFail: f(0.1), Cut: f(0.01), ArmFail: f(0.01),
			AckLost: f(0.01), AckLate: f(0.01), Duplicate: f(0.02), KeepAliveLost: f(0.1),
		},
		FaultsFor: dur(2*time.Hour, 4*time.Hour),
		Settle:    time.Hour,
		// Drawn last, so the draws above make the same worlds as before.
		ServerAhead: dur(0, 0, 0, 20*time.Millisecond, 1200*time.Millisecond),
	}
}

// BeyondContract makes the world's provider break its contract the way the
// sandbox's slow-search fault does by default: a slow search runs 110 s,
// past the client's 100 s timeout, so a search can still be running (and
// be billed later) when the engine has given up on its reply.
func BeyondContract(c Config) Config {
	c.Sandbox.SlowSearchTime = sandbox.DefaultSlowSearchTime
	c.Faults.MaxSendPause = c.Policy.SafetyMargin.D() / 4
	c.Label = "beyond contract"
	return c
}
