package httpops

import (
	"context"
	"time"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/serpent-engine/serpent/projections"
)

// Source is what the server reads at each request, over the engine's
// connection to NATS. serpent run implements it (internal/cli).
type Source interface {
	// Connection says whether the connection to NATS is up, and its
	// state in words.
	Connection() (up bool, state string)
	// Stream and Bucket report whether a stream, or a KV bucket, is
	// there: nil, or why not.
	Stream(ctx context.Context, name string) error
	Bucket(ctx context.Context, name string) error
	// Lag is how far the projections trail the log, as the server sees
	// it (now when the server does not say).
	Lag(ctx context.Context, now time.Time) (Lag, error)
	// LastSeq is the event log's last sequence.
	LastSeq(ctx context.Context) (uint64, error)
	// Jobs reads the status values of jobs from serp_status, in the order
	// given, leaving out those not projected yet or unreadable. An error
	// says the bucket cannot be read.
	Jobs(ctx context.Context, ids []string) ([]projections.JobView, error)
	// DayLedgers reads the ledgers of days (projections.DayLayout) from
	// serp_ledger: a day without a value bought nothing and is left out;
	// unread lists the days that could not be read. An error says the
	// bucket cannot be read.
	DayLedgers(ctx context.Context, days []string) (ledgers map[string]projections.DayLedger, unread []string, err error)
	// Accounts reads the API accounts' shared state at now.
	Accounts(ctx context.Context, now time.Time) ([]Account, error)
}

// Lag is how far the projections trail the log: the log's last sequence,
// the events not applied yet, and how long the oldest of them has waited.
type Lag struct {
	Last    uint64
	Pending uint64
	Behind  time.Duration
	// CatchUp is set while this engine's projection runner catches up
	// with a log it trails by more than a batch.
	CatchUp *CatchUp
}

// CatchUp is how far a projection runner catching up has got: the events
// applied since it began (Done of Total), at Rate events a second, with
// about Left to go.
type CatchUp struct {
	Done, Total uint64
	Rate        float64
	Left        time.Duration
}

// Account is one API account as every engine shares it
// (engine.AccountStatus).
type Account struct {
	Account string
	// Limits are those the engines apply; Refused is set while the stored
	// ones are refused.
	Limits  accounts.Limits
	Refused *RefusedLimits
	// SpentToday is the day's (UTC) spend, in flight included.
	SpentToday  accounts.Spend
	InFlight    int
	PausedUntil *time.Time
	PauseReason string
	// Waiting counts the jobs held back by the account's limits;
	// WaitingWhy by reason.
	Waiting    int
	WaitingWhy map[string]int
}

// RefusedLimits is a stored value of an account's limits that the
// engines refuse, and what they do instead: Holding engines hold the
// account's new purchases, Keeping ones keep the limits applied before.
type RefusedLimits struct {
	Key, Value, Error string
	Holding, Keeping  int
}

// Refusal is an account whose stored limits this engine refuses
// (engine.Refusal): under Key, for Err. Held says the engine had no
// limits to keep, and holds the account's new purchases.
type Refusal struct {
	Account string
	Key     string
	Err     error
	Held    bool
}
