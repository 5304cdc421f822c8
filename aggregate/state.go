package aggregate

import (
	"slices"
	"time"

	"github.com/serpent-engine/serpent/events"
)

// State is everything a job's history says about it.
type State struct {
	JobID   string
	Version uint64 // the version of the last event applied
	Status  Status

	Slot       time.Time
	Search     events.SearchContext
	Body       string
	BodySHA256 string
	Policy     events.RetryPolicy
	Account    string
	Priority   string
	Source     string

	ScheduledAt time.Time
	UpdatedAt   time.Time
	NextRunAt   time.Time

	// Attempts holds one entry per key, in order; the last is current.
	Attempts []Attempt
	// Sends counts every Sent of the job; Retries the backoffs so far.
	Sends   int
	Retries int
	// Lease is the claim of the last Sent; it only holds while sending.
	Lease Lease

	LastOutcome *events.OutcomeClassified
	// Reconcile says why the job is reconciling.
	Reconcile string
	// Accounted are the charges (ChargeID) already settled by a
	// charged_no_result verdict; a later reconciliation ignores them.
	Accounted   []string
	Repurchases int

	Result  *events.ObservationStored
	Failure *events.JobFailed
	Cancel  *events.JobCancelled
	// CheckPending: the job stored a result the log cannot prove was its
	// key's only execution, and the billing ledger has not been asked yet
	// (ObservationStored.CheckCharges). Checked is the answer.
	CheckPending bool
	Checked      *events.ChargesChecked
}

// Attempt is one key of a job and what is known of it.
type Attempt struct {
	Number     int
	Key        string
	Reason     string
	CreatedAt  time.Time
	FirstSend  time.Time
	LastSend   time.Time
	Deadline   time.Time
	Tries      int
	LastClass  Class
	Definite   bool
	RequestIDs []string
	// BillingUnresolved: a send of the key was answered 503
	// billing_unavailable, the API's word that its search ran while its
	// billing was not settled: a ledger without its charge may be behind.
	BillingUnresolved bool `json:",omitempty"`
}

// Sent reports whether the key ever left in a request.
func (a Attempt) Sent() bool { return a.Tries > 0 }

// Unresolved reports whether the key was sent and nothing definite is known
// of its search: it may have been charged.
func (a Attempt) Unresolved() bool { return a.Sent() && !a.Definite }

// Lease is a worker's claim on a job.
type Lease struct {
	Worker string
	Until  time.Time
}

// Current returns the current attempt, or false before the first key.
func (s State) Current() (Attempt, bool) {
	if len(s.Attempts) == 0 {
		return Attempt{}, false
	}
	return s.Attempts[len(s.Attempts)-1], true
}

// Exists reports whether the job was scheduled.
func (s State) Exists() bool { return s.Version > 0 }

// Fold builds a state from a job's events in order.
func Fold(evs []events.Event) State {
	var s State
	for _, e := range evs {
		s.apply(e)
	}
	return s
}

// Apply returns the state after one more event. It never fails: an event is
// a fact. The given state is not changed.
func Apply(s State, e events.Event) State {
	s.Attempts = slices.Clone(s.Attempts)
	for i := range s.Attempts {
		s.Attempts[i].RequestIDs = slices.Clone(s.Attempts[i].RequestIDs)
	}
	s.Accounted = slices.Clone(s.Accounted)
	s.apply(e)
	return s
}

// ApplyAll returns the state after evs, in order: Apply of each in turn,
// with the state's slices copied once rather than at every event. The
// given state is not changed.
func ApplyAll(s State, evs []events.Event) State {
	if len(evs) == 0 {
		return s
	}
	s = Apply(s, evs[0])
	for _, e := range evs[1:] {
		s.apply(e) // s is this call's own copy now
	}
	return s
}

// attempt returns the attempt holding key, or nil.
func (s *State) attempt(key string) *Attempt {
	for i := len(s.Attempts) - 1; i >= 0; i-- {
		if s.Attempts[i].Key == key {
			return &s.Attempts[i]
		}
	}
	return nil
}

func (s *State) addAttempt(n int, key, reason string, at time.Time) {
	s.Attempts = append(s.Attempts, Attempt{Number: n, Key: key, Reason: reason, CreatedAt: at})
}

func (s *State) apply(e events.Event) {
	s.Version = e.Version
	s.UpdatedAt = e.Time
	if s.JobID == "" {
		s.JobID = e.JobID
	}
	switch d := e.Data.(type) {
	case events.JobScheduled:
		s.Status = StatusScheduled
		s.Slot, s.Search, s.Body, s.BodySHA256 = d.Slot, d.Search, d.Body, d.BodySHA256
		s.Policy, s.Account, s.Priority, s.Source = d.Policy, d.Account, d.Priority, d.Source
		s.ScheduledAt, s.NextRunAt = e.Time, d.NotBefore
	case events.AttemptCreated:
		s.addAttempt(d.Attempt, d.Key, "scheduled", e.Time)
	case events.Sent:
		s.Status = StatusSending
		s.Sends++
		s.Lease = Lease{Worker: d.Worker, Until: d.LeaseUntil}
		if a := s.attempt(d.Key); a != nil {
			a.Tries = max(a.Tries+1, d.Try)
			a.LastSend = e.Time
			if a.FirstSend.IsZero() {
				a.FirstSend, a.Deadline = e.Time, d.Deadline
			}
		}
	case events.OutcomeClassified:
		s.LastOutcome = &d
		s.Lease = Lease{}
		s.NextRunAt = d.NextRunAt
		if a := s.attempt(d.Key); a != nil {
			a.LastClass = Class(d.Class)
			a.BillingUnresolved = a.BillingUnresolved || Class(d.Class) == ClassUnresolved
			// An answer that leads to the same key again settles
			// nothing: that key's next send must still speak for it.
			a.Definite = a.Definite || Class(d.Class).Definite() && Action(d.Action) != ActionRetrySameKey
			a.RequestIDs = appendNew(a.RequestIDs, d.RequestID)
		}
		switch Action(d.Action) {
		case ActionRetrySameKey, ActionRetryNewKey:
			s.Status = StatusRetrying
			s.Retries++
		case ActionReconcile:
			s.Status = StatusReconciling
			s.Reconcile = d.Class
		}
	case events.KeyRotated:
		s.addAttempt(d.Attempt, d.NewKey, d.Reason, e.Time)
		s.Status = StatusRetrying
		s.NextRunAt = d.NextRunAt
		s.Reconcile = ""
	case events.DeadlineReached:
		s.Status = StatusReconciling
		s.Lease = Lease{}
		s.Reconcile = d.Reason
	case events.Reconciled:
		for _, k := range d.Keys {
			if a := s.attempt(k); a != nil {
				a.Definite = true
			}
		}
		if d.Verdict == VerdictCharged {
			s.Status = StatusChargedNoResult
			for _, en := range d.Entries {
				s.Accounted = appendNew(s.Accounted, ChargeID(en))
			}
		}
	case events.ObservationStored:
		s.Status = StatusSucceeded
		s.Lease = Lease{}
		s.Result = &d
		s.CheckPending = d.CheckCharges
		if a := s.attempt(d.Key); a != nil {
			a.LastClass, a.Definite = ClassSuccess, true
			a.RequestIDs = appendNew(a.RequestIDs, d.RequestID)
		}
	case events.JobFailed:
		s.Status = StatusFailed
		s.Lease = Lease{}
		s.Failure = &d
	case events.JobCancelled:
		s.Status = StatusCancelled
		s.Lease = Lease{}
		s.Cancel = &d
	case events.RepurchaseAuthorized:
		s.Repurchases++
		s.Status = StatusRetrying
	case events.ChargesChecked:
		s.CheckPending = false
		s.Checked = &d
	}
}

// RequestIDs returns every request id the job has seen, in order.
func (s State) RequestIDs() []string {
	var out []string
	for _, a := range s.Attempts {
		for _, id := range a.RequestIDs {
			out = appendNew(out, id)
		}
	}
	return out
}

func appendNew(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}
