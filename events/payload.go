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

// kind is what the codec knows of one event type.
type kind struct {
	schema int
	decode func([]byte) (Payload, error)
}

func kindOf[T Payload]() kind {
	var zero T
	return kind{schema: zero.SchemaVersion(), decode: decodeAs[T]}
}

// kinds maps every type name to its current schema and decoder. It is the
// single list the codec, the golden tests and the fuzzers walk.
var kinds = map[string]kind{
	TypeJobScheduled:         kindOf[JobScheduled](),
	TypeAttemptCreated:       kindOf[AttemptCreated](),
	TypeSent:                 kindOf[Sent](),
	TypeOutcomeClassified:    kindOf[OutcomeClassified](),
	TypeKeyRotated:           kindOf[KeyRotated](),
	TypeDeadlineReached:      kindOf[DeadlineReached](),
	TypeReconciled:           kindOf[Reconciled](),
	TypeObservationStored:    kindOf[ObservationStored](),
	TypeJobFailed:            kindOf[JobFailed](),
	TypeJobCancelled:         kindOf[JobCancelled](),
	TypeRepurchaseAuthorized: kindOf[RepurchaseAuthorized](),
	TypeChargesChecked:       kindOf[ChargesChecked](),
}

// Types returns every known event type name, sorted.
func Types() []string {
	return slices.Sorted(maps.Keys(kinds))
}

// CurrentSchema returns the schema version this code writes for a type
// name, or 0 if the type is unknown.
func CurrentSchema(typ string) int { return kinds[typ].schema }
