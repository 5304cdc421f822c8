package projections

import (
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// JobView is the public view of one job: what serpent status prints and
// what the serp_status bucket holds. Field names are part of the format.
type JobView struct {
	JobID     string               `json:"job_id"`
	Status    aggregate.Status     `json:"status"`
	Version   uint64               `json:"version"`
	Slot      time.Time            `json:"slot"`
	Search    events.SearchContext `json:"search"`
	Account   string               `json:"account,omitempty"`
	Priority  string               `json:"priority,omitempty"`
	Scheduled time.Time            `json:"scheduled_at"`
	Updated   time.Time            `json:"updated_at"`
	NextRunAt *time.Time           `json:"next_run_at,omitempty"`
	Attempt   int                  `json:"attempt"`
	Sends     int                  `json:"sends"`
	// CurrentKey is the attempt key the job sends now, or sent last.
	CurrentKey  string               `json:"current_key,omitempty"`
	Attempts    []AttemptView        `json:"attempts"`
	LastOutcome *OutcomeView         `json:"last_outcome,omitempty"`
	RequestIDs  []string             `json:"request_ids,omitempty"`
	Reconcile   string               `json:"reconcile_reason,omitempty"`
	Result      *ResultView          `json:"result,omitempty"`
	Failure     *events.JobFailed    `json:"failure,omitempty"`
	Cancelled   *events.JobCancelled `json:"cancelled,omitempty"`
	Repurchases int                  `json:"repurchases,omitempty"`
	// ChargeCheck is the check of the stored key's charges in the billing
	// ledger, made when the log cannot prove that the stored result was
	// the key's only execution.
	ChargeCheck *ChargeCheckView `json:"charge_check,omitempty"`
}

// ChargeCheckView is a check of a stored key's charges: pending until the
// key's searches have ended, then its verdict (confirmed, or
// double_charge: the API charged the key more than once).
type ChargeCheckView struct {
	Pending    bool     `json:"pending"`
	Verdict    string   `json:"verdict,omitempty"`
	Charges    int      `json:"charges"`
	RequestIDs []string `json:"request_ids,omitempty"`
}

// AttemptView is one key of a job.
type AttemptView struct {
	Number     int        `json:"number"`
	Key        string     `json:"key"`
	Reason     string     `json:"reason"`
	CreatedAt  time.Time  `json:"created_at"`
	FirstSend  *time.Time `json:"first_send,omitempty"`
	Deadline   *time.Time `json:"deadline,omitempty"`
	Tries      int        `json:"tries"`
	LastClass  string     `json:"last_class,omitempty"`
	Definite   bool       `json:"definite"`
	RequestIDs []string   `json:"request_ids,omitempty"`
}

// OutcomeView is the last classified outcome of a job.
type OutcomeView struct {
	Key       string `json:"key"`
	Status    int    `json:"status"`
	Code      string `json:"code,omitempty"`
	Unknown   string `json:"unknown,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	Replayed  bool   `json:"replayed"`
	Class     string `json:"class"`
	Action    string `json:"action"`
}

// ResultView describes the stored observation without its body.
type ResultView struct {
	Key       string `json:"key"`
	RequestID string `json:"request_id"`
	Replayed  bool   `json:"replayed"`
	Pages     int    `json:"pages"`
}

// ViewOf describes a job's state.
func ViewOf(s aggregate.State) JobView {
	v := JobView{
		JobID: s.JobID, Status: s.Status, Version: s.Version, Slot: s.Slot, Search: s.Search,
		Account: s.Account, Priority: s.Priority, Scheduled: s.ScheduledAt, Updated: s.UpdatedAt,
		Sends: s.Sends, RequestIDs: s.RequestIDs(), Reconcile: s.Reconcile, Failure: s.Failure,
		Cancelled: s.Cancel, Repurchases: s.Repurchases, Attempts: make([]AttemptView, 0, len(s.Attempts)),
	}
	switch {
	case s.Status == aggregate.StatusSending:
		at := s.Lease.Until // the earliest another worker may resume it
		v.NextRunAt = &at
	case !s.Status.Terminal() && !s.NextRunAt.IsZero():
		at := s.NextRunAt
		v.NextRunAt = &at
	case s.CheckPending:
		at := s.Settled() // when the ledger is asked
		v.NextRunAt = &at
	}
	for _, a := range s.Attempts {
		av := AttemptView{Number: a.Number, Key: a.Key, Reason: a.Reason, CreatedAt: a.CreatedAt, Tries: a.Tries,
			LastClass: string(a.LastClass), Definite: a.Definite, RequestIDs: a.RequestIDs}
		if a.Sent() {
			fs, dl := a.FirstSend, a.Deadline
			av.FirstSend, av.Deadline = &fs, &dl
		}
		v.Attempts = append(v.Attempts, av)
	}
	if a, ok := s.Current(); ok {
		v.Attempt, v.CurrentKey = a.Number, a.Key
	}
	if o := s.LastOutcome; o != nil {
		v.LastOutcome = &OutcomeView{Key: o.Key, Status: o.Status, Code: o.Code, Unknown: o.Unknown,
			RequestID: o.RequestID, Replayed: o.Replayed, Class: o.Class, Action: o.Action}
	}
	if r := s.Result; r != nil {
		v.Result = &ResultView{Key: r.Key, RequestID: r.RequestID, Replayed: r.Replayed, Pages: r.Pages}
	}
	switch c := s.Checked; {
	case s.CheckPending:
		v.ChargeCheck = &ChargeCheckView{Pending: true}
	case c != nil:
		v.ChargeCheck = &ChargeCheckView{Verdict: c.Verdict, Charges: c.Charges}
		for _, en := range c.Entries {
			v.ChargeCheck.RequestIDs = appendNew(v.ChargeCheck.RequestIDs, en.RequestID)
		}
	}
	return v
}

// StatusValue is what serp_status holds under a job id: the job's view,
// the stream sequence of the last event applied (seq), and the folded
// state the next event is applied to (fold). Readers use the view's
// fields; fold is the runner's working state, in aggregate.State's Go
// field names, without the request body and the result (those are in the
// log and in serp_observations).
type StatusValue struct {
	JobView
	Seq  uint64          `json:"seq"`
	Fold aggregate.State `json:"fold"`
}

func (v *StatusValue) lastSeq() uint64 { return v.Seq }

func (v *StatusValue) apply(r Record) {
	s := aggregate.Apply(v.Fold, r.Event)
	s.Body = ""
	if s.Result != nil && s.Result.Result != nil {
		res := *s.Result
		res.Result = nil
		s.Result = &res
	}
	v.Fold, v.Seq = s, r.Seq
	v.JobView = ViewOf(s)
}
