package events

import (
	"encoding/json"
	"time"
)

// JobScheduled is the first event of every job: one scheduled observation,
// with the exact body bytes that every attempt key of the job will carry.
type JobScheduled struct {
	Slot       time.Time     `json:"slot"`
	Search     SearchContext `json:"search"`
	Body       string        `json:"body"`
	BodySHA256 string        `json:"body_sha256"`
	Policy     RetryPolicy   `json:"policy"`
	NotBefore  time.Time     `json:"not_before"`
	Account    string        `json:"account,omitempty"`
	Priority   string        `json:"priority,omitempty"`
	Source     string        `json:"source,omitempty"`
}

// AttemptCreated persists an attempt key (an Idempotency-Key) with the hash
// of the body it will carry, before any request uses it.
type AttemptCreated struct {
	Attempt    int    `json:"attempt"`
	Key        string `json:"key"`
	BodySHA256 string `json:"body_sha256"`
}

// Sent is the claim on a job and the stamp of a send: it is appended before
// the request leaves. The first Sent of a key is that key's first send time,
// from which its Deadline is computed.
type Sent struct {
	Key        string    `json:"key"`
	Attempt    int       `json:"attempt"`
	Try        int       `json:"try"`
	Worker     string    `json:"worker"`
	LeaseUntil time.Time `json:"lease_until"`
	Deadline   time.Time `json:"deadline"`
}

// OutcomeClassified records what one send of a key came back with and what
// the job does next. Status 0 means the outcome is unknown; Unknown says why.
type OutcomeClassified struct {
	Key        string    `json:"key"`
	Try        int       `json:"try"`
	Status     int       `json:"status"`
	Code       string    `json:"code,omitempty"`
	Unknown    string    `json:"unknown,omitempty"`
	RequestID  string    `json:"request_id,omitempty"`
	Replayed   bool      `json:"replayed"`
	RetryAfter Duration  `json:"retry_after,omitempty"`
	Class      string    `json:"class"`
	Action     string    `json:"action"`
	Attempt    int       `json:"attempt"`
	Sends      int       `json:"sends"`
	NextRunAt  time.Time `json:"next_run_at"`
}

// KeyRotated persists a new attempt key, written before the next POST. It
// follows a definite outcome of the old key, a reconciliation that found no
// charge, or an authorised re-purchase.
type KeyRotated struct {
	OldKey     string    `json:"old_key"`
	NewKey     string    `json:"new_key"`
	Attempt    int       `json:"attempt"`
	BodySHA256 string    `json:"body_sha256"`
	Reason     string    `json:"reason"`
	NextRunAt  time.Time `json:"next_run_at"`
}

// DeadlineReached records that a key whose outcome is still unknown may not
// be sent again (its replay deadline passed, or the job's age budget ran
// out): the job goes to reconciliation.
type DeadlineReached struct {
	Key      string    `json:"key"`
	Deadline time.Time `json:"deadline"`
	Reason   string    `json:"reason"`
}

// LedgerEntry is one charge found in the provider's billing ledger.
type LedgerEntry struct {
	RequestID    string    `json:"request_id"`
	Key          string    `json:"key"`
	Pages        int       `json:"pages"`
	BilledPages  int       `json:"billed_pages"`
	AmountMicros int64     `json:"amount_micros"`
	At           time.Time `json:"at,omitzero"`
}

// Reconciled records a look-up of the job's keys and request ids in the
// billing ledger, the distinct charges found and the verdict.
type Reconciled struct {
	Keys       []string      `json:"keys"`
	RequestIDs []string      `json:"request_ids,omitempty"`
	Entries    []LedgerEntry `json:"entries,omitempty"`
	Charges    int           `json:"charges"`
	Verdict    string        `json:"verdict"`
	Action     string        `json:"action"`
}

// ObservationStored is the bought observation; it finishes the job.
type ObservationStored struct {
	Key       string          `json:"key"`
	RequestID string          `json:"request_id"`
	Replayed  bool            `json:"replayed"`
	Pages     int             `json:"pages"`
	Result    json.RawMessage `json:"result"`
	// CheckCharges: the log cannot prove that this response was the key's
	// first and only execution (the key was sent more than once). Its
	// charges are looked up in the billing ledger once the key's
	// searches have ended, and ChargesChecked records what was found.
	CheckCharges bool `json:"check_charges,omitempty"`
}

// ChargesChecked records a look-up of the stored key's charges in the
// billing ledger, made because the log could not prove the stored
// response was the key's only execution. More than one charge is a
// double charge the API made under one key: found, counted and shown.
type ChargesChecked struct {
	Key        string        `json:"key"`
	RequestIDs []string      `json:"request_ids,omitempty"`
	Entries    []LedgerEntry `json:"entries,omitempty"`
	Charges    int           `json:"charges"`
	Verdict    string        `json:"verdict"`
}

// JobFailed ends a job with a failure for the caller: a confirmed API error
// that retrying cannot fix, or an exhausted budget.
type JobFailed struct {
	Reason    string `json:"reason"`
	Key       string `json:"key,omitempty"`
	Status    int    `json:"status,omitempty"`
	Code      string `json:"code,omitempty"`
	Message   string `json:"message,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// JobCancelled ends a job by operator action before it finished.
type JobCancelled struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
	// Unresolved is the key whose last send has no known outcome, if any: it
	// may have been charged, and the audit says so.
	Unresolved string `json:"unresolved,omitempty"`
}

// RepurchaseAuthorized records an operator's decision to buy again an
// observation that was charged but whose response was lost. It is written
// together with the KeyRotated that carries the new key.
type RepurchaseAuthorized struct {
	By     string `json:"by"`
	Reason string `json:"reason"`
}

func (JobScheduled) EventType() string         { return TypeJobScheduled }
func (AttemptCreated) EventType() string       { return TypeAttemptCreated }
func (Sent) EventType() string                 { return TypeSent }
func (OutcomeClassified) EventType() string    { return TypeOutcomeClassified }
func (KeyRotated) EventType() string           { return TypeKeyRotated }
func (DeadlineReached) EventType() string      { return TypeDeadlineReached }
func (Reconciled) EventType() string           { return TypeReconciled }
func (ObservationStored) EventType() string    { return TypeObservationStored }
func (JobFailed) EventType() string            { return TypeJobFailed }
func (JobCancelled) EventType() string         { return TypeJobCancelled }
func (RepurchaseAuthorized) EventType() string { return TypeRepurchaseAuthorized }
func (ChargesChecked) EventType() string       { return TypeChargesChecked }

func (JobScheduled) SchemaVersion() int         { return 1 }
func (AttemptCreated) SchemaVersion() int       { return 1 }
func (Sent) SchemaVersion() int                 { return 1 }
func (OutcomeClassified) SchemaVersion() int    { return 1 }
func (KeyRotated) SchemaVersion() int           { return 1 }
func (DeadlineReached) SchemaVersion() int      { return 1 }
func (Reconciled) SchemaVersion() int           { return 1 }
func (ObservationStored) SchemaVersion() int    { return 1 }
func (JobFailed) SchemaVersion() int            { return 1 }
func (JobCancelled) SchemaVersion() int         { return 1 }
func (RepurchaseAuthorized) SchemaVersion() int { return 1 }
func (ChargesChecked) SchemaVersion() int       { return 1 }
