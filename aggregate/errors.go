package aggregate

import (
	"errors"
	"fmt"
	"time"
)

// Errors Decide returns. Each says what the caller should do.
var (
	// ErrNoJob: the input needs a scheduled job and there is none.
	ErrNoJob = errors.New("aggregate: job does not exist")
	// ErrExists: the job was scheduled before; scheduling again changes
	// nothing (this is how one observation stays one job).
	ErrExists = errors.New("aggregate: job is already scheduled")
	// ErrTerminal: the job is finished; drop the input.
	ErrTerminal = errors.New("aggregate: job is finished")
	// ErrMustReconcile: the job waits for a billing ledger answer, not a send.
	ErrMustReconcile = errors.New("aggregate: job is reconciling; ask the billing ledger")
	// ErrNotReconciling: a ledger answer came for a job that did not ask.
	ErrNotReconciling = errors.New("aggregate: job is not reconciling")
	// ErrStaleOutcome: the outcome is for a send that no longer decides
	// anything (an old key, or an unknown outcome of a superseded try).
	ErrStaleOutcome = errors.New("aggregate: outcome no longer decides anything")
	// ErrInvalidInput: the input itself is wrong; a bug in the caller.
	ErrInvalidInput = errors.New("aggregate: invalid input")
	// ErrNotAllowed: the operator action does not apply to the job's state.
	ErrNotAllowed = errors.New("aggregate: action not allowed in this state")
	// ErrNotDue and ErrLeased match NotDueError and LeasedError.
	ErrNotDue = errors.New("aggregate: job is not due")
	ErrLeased = errors.New("aggregate: job is leased to another worker")
	// ErrNotSettled matches NotSettledError.
	ErrNotSettled = errors.New("aggregate: the billing ledger may not show every charge yet")
)

// NotSettledError says when a ledger answer finding no charge will be
// conclusive: a search the job's last send started may still be running.
type NotSettledError struct{ Until time.Time }

func (e *NotSettledError) Error() string {
	return fmt.Sprintf("aggregate: a search may still be running; ask the billing ledger again after %s", e.Until.Format(time.RFC3339Nano))
}

func (e *NotSettledError) Is(target error) bool { return target == ErrNotSettled }

// NotDueError says when the job will be due.
type NotDueError struct{ Until time.Time }

func (e *NotDueError) Error() string {
	return fmt.Sprintf("aggregate: job is not due until %s", e.Until.Format(time.RFC3339Nano))
}

func (e *NotDueError) Is(target error) bool { return target == ErrNotDue }

// LeasedError says which worker holds the job and until when.
type LeasedError struct {
	Worker string
	Until  time.Time
}

func (e *LeasedError) Error() string {
	return fmt.Sprintf("aggregate: job is leased to %s until %s", e.Worker, e.Until.Format(time.RFC3339Nano))
}

func (e *LeasedError) Is(target error) bool { return target == ErrLeased }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidInput, fmt.Sprintf(format, args...))
}
