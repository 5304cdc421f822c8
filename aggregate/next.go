package aggregate

import "time"

// Step is the kind of work a job needs next.
type Step string

const (
	// StepWait: nothing to do before At.
	StepWait Step = "wait"
	// StepSend: decide Due; it claims the job for a send, or moves it to
	// reconciliation when its key may not be sent again.
	StepSend Step = "send"
	// StepReconcile: look ReconcileQuery up in the billing ledger and decide
	// the LedgerAnswer. A reconciling job, or a succeeded one whose charges
	// must be checked, waits first until its last send's search must have
	// ended (State.Settled).
	StepReconcile Step = "reconcile"
	// StepDone: the job is finished.
	StepDone Step = "done"
)

// Next tells a worker (and the timer) what the job needs and when.
type Next struct {
	Step Step
	At   time.Time
}

// Next returns the job's next step at time now. A job waiting for its lease
// to run out waits until the lease ends; then another worker resumes it with
// the same key.
func (s State) Next(now time.Time) Next {
	switch {
	case s.Exists() && s.CheckPending:
		if settled := s.Settled(); now.Before(settled) {
			return Next{Step: StepWait, At: settled}
		}
		return Next{Step: StepReconcile, At: now}
	case !s.Exists() || s.Status.Terminal():
		return Next{Step: StepDone}
	case s.Status == StatusReconciling:
		if settled := s.Settled(); now.Before(settled) {
			return Next{Step: StepWait, At: settled}
		}
		return Next{Step: StepReconcile, At: now}
	case s.Status == StatusSending:
		if now.Before(s.Lease.Until) {
			return Next{Step: StepWait, At: s.Lease.Until}
		}
		return Next{Step: StepSend, At: now}
	case now.Before(s.NextRunAt):
		return Next{Step: StepWait, At: s.NextRunAt}
	}
	return Next{Step: StepSend, At: now}
}

// Finished reports whether the job needs nothing more: it is in a final
// state and no check of its charges waits.
func (s State) Finished() bool { return s.Status.Terminal() && !s.CheckPending }
