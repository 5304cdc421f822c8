package aggregate

// Status is where a job stands.
type Status string

const (
	// StatusNew is the state of a job with no events.
	StatusNew Status = ""
	// StatusScheduled: the job waits for its first send.
	StatusScheduled Status = "scheduled"
	// StatusSending: a worker claimed the job (Sent) and waits for the reply.
	StatusSending Status = "sending"
	// StatusRetrying: the job waits out a backoff before the next send.
	StatusRetrying Status = "retrying"
	// StatusReconciling: the outcome of a key cannot be learned from the API
	// any more; the billing ledger decides.
	StatusReconciling Status = "reconciling"

	// StatusSucceeded: the observation is stored.
	StatusSucceeded Status = "succeeded"
	// StatusFailed: a confirmed error or an exhausted budget, for the caller.
	StatusFailed Status = "failed"
	// StatusChargedNoResult: the search was charged but its response is
	// lost; only an operator can authorise buying it again.
	StatusChargedNoResult Status = "charged_no_result"
	// StatusCancelled: an operator cancelled the job.
	StatusCancelled Status = "cancelled"
)

// Statuses lists every status a job can be in, in lifecycle order.
func Statuses() []Status {
	return []Status{StatusScheduled, StatusSending, StatusRetrying, StatusReconciling,
		StatusSucceeded, StatusFailed, StatusChargedNoResult, StatusCancelled}
}

// Terminal reports whether no automatic step follows.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusChargedNoResult, StatusCancelled:
		return true
	}
	return false
}
