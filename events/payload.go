package events

import (
	"maps"
	"slices"
)

// Type names of every event. They are the public vocabulary of the log and
// never change; a changed meaning gets a new schema version instead.
const (
	TypeJobScheduled         = "JobScheduled"
	TypeAttemptCreated       = "AttemptCreated"
	TypeSent                 = "Sent"
	TypeOutcomeClassified    = "OutcomeClassified"
	TypeKeyRotated           = "KeyRotated"
	TypeDeadlineReached      = "DeadlineReached"
	TypeReconciled           = "Reconciled"
	TypeObservationStored    = "ObservationStored"
	TypeJobFailed            = "JobFailed"
	TypeJobCancelled         = "JobCancelled"
	TypeRepurchaseAuthorized = "RepurchaseAuthorized"
	TypeChargesChecked       = "ChargesChecked"
)

// Payload is the data of one event. Each implementation is a plain struct
// with JSON tags; EventType and SchemaVersion name it in the log.
type Payload interface {
	// EventType is the stable type name written to the log.
	EventType() string
	// SchemaVersion is the version of the payload's shape that this code
	// writes. Decoding accepts it and older versions with an upcaster.
	SchemaVersion() int
}

// kind is what the codec knows of one event type: its current schema,
// its decoder with encoding/json and its reader on the fast path.
type kind struct {
	schema int
	decode func([]byte) (Payload, error)
	scan   func(*scan) (Payload, bool)
}

func kindOf[T Payload](scan func(*scan) (Payload, bool)) kind {
	var zero T
	return kind{schema: zero.SchemaVersion(), decode: decodeAs[T], scan: scan}
}

// kinds maps every type name to its current schema and decoders. It is the
// single list the codec, the golden tests and the fuzzers walk.
var kinds = map[string]kind{
	TypeJobScheduled:         kindOf[JobScheduled](scanJobScheduled),
	TypeAttemptCreated:       kindOf[AttemptCreated](scanAttemptCreated),
	TypeSent:                 kindOf[Sent](scanSent),
	TypeOutcomeClassified:    kindOf[OutcomeClassified](scanOutcomeClassified),
	TypeKeyRotated:           kindOf[KeyRotated](scanKeyRotated),
	TypeDeadlineReached:      kindOf[DeadlineReached](scanDeadlineReached),
	TypeReconciled:           kindOf[Reconciled](scanReconciled),
	TypeObservationStored:    kindOf[ObservationStored](scanObservationStored),
	TypeJobFailed:            kindOf[JobFailed](scanJobFailed),
	TypeJobCancelled:         kindOf[JobCancelled](scanJobCancelled),
	TypeRepurchaseAuthorized: kindOf[RepurchaseAuthorized](scanRepurchaseAuthorized),
	TypeChargesChecked:       kindOf[ChargesChecked](scanChargesChecked),
}

// Types returns every known event type name, sorted.
func Types() []string {
	return slices.Sorted(maps.Keys(kinds))
}

// CurrentSchema returns the schema version this code writes for a type
// name, or 0 if the type is unknown.
func CurrentSchema(typ string) int { return kinds[typ].schema }
