package aggregate

import (
	"encoding/json"
	"time"

	"github.com/serpent-engine/serpent/events"
)

// Input is one thing a job can meet. Decide takes exactly one.
type Input interface{ isInput() }

// Schedule creates the job. Build it with NewSchedule from a validated
// command, which fixes the job id and the body bytes.
type Schedule struct {
	JobID     string
	Slot      time.Time
	Search    events.SearchContext
	Body      string
	Policy    events.RetryPolicy
	NotBefore time.Time
	Account   string
	Priority  string
	Source    string
}

// Due says a worker picked the job up because its timer fired. Decide claims
// the job for the worker (Sent), or moves it to reconciliation when the key
// may not be sent again.
type Due struct {
	Worker string
}

// Outcome is what one send of a key came back with. Status 0 means unknown:
// no reply, a reply that could not be read, or a page that is not the API's
// own. A status is only given when the reply was identified as the API's.
type Outcome struct {
	Key        string
	Try        int
	Status     int
	Code       string
	Message    string
	Unknown    string // why the outcome is unknown, when Status is 0
	RequestID  string
	Replayed   bool
	RetryAfter time.Duration
	// Result is the decoded search result of a 200, Pages its pages with
	// results.
	Result json.RawMessage
	Pages  int
}

// LedgerAnswer is what the billing ledger said about the keys and request
// ids of ReconcileQuery. Entries are the charges found; the same charge
// found twice (by key and by request id) counts once.
type LedgerAnswer struct {
	Keys       []string
	RequestIDs []string
	Entries    []events.LedgerEntry
}

// Cancel is an operator's order to stop a job that is not finished.
type Cancel struct {
	By     string
	Reason string
}

// AuthorizeRepurchase is an operator's decision to buy again an observation
// that was charged but whose response was lost.
type AuthorizeRepurchase struct {
	By     string
	Reason string
	// Seen, when not nil, is how many re-purchases the job had when the
	// operator decided (its status shows them). It makes the request safe
	// to repeat: once the job has more, the decision was carried out and
	// a repeat authorises nothing. Nil authorises one more whenever the
	// job is charged_no_result.
	Seen *int
}

func (Schedule) isInput()            {}
func (Due) isInput()                 {}
func (Outcome) isInput()             {}
func (LedgerAnswer) isInput()        {}
func (Cancel) isInput()              {}
func (AuthorizeRepurchase) isInput() {}

// Reconciliation verdicts.
const (
	VerdictNotCharged = "not_charged"
	VerdictCharged    = "charged"
	// Verdicts of a check of a stored key's charges (ChargesChecked).
	VerdictConfirmed    = "confirmed"     // one charge, or none
	VerdictDoubleCharge = "double_charge" // the API charged the key more than once
)

// Reasons recorded in events.
const (
	ReasonReplayDeadline = "replay_deadline"
	ReasonAgeBudget      = "age_budget"
	ReasonKeyBudget      = "key_budget"
	ReasonAPIError       = "api_error"
	// ReasonChargeNotInLedger: the API said a key was billed, and the
	// billing ledger never showed the charge.
	ReasonChargeNotInLedger = "charge_not_in_ledger"
	ReasonNotCharged        = "not_charged"
	ReasonRepurchase        = "repurchase"
)
