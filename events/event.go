package events

import (
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
)

// Event is one fact in a job's history.
type Event struct {
	// ID is a ULID, unique across the log. It is also the Nats-Msg-Id of the
	// message that carries the event, so a retried append is not stored
	// twice.
	ID string
	// JobID names the job; its events live on serp.events.<JobID>.
	JobID string
	// Version is the event's position in the job's history: 1 for
	// JobScheduled, then 2, 3, ... without gaps.
	Version uint64
	// Time is when the event was decided, as given by the caller.
	Time time.Time
	// Data is the payload; its dynamic type is one of this package's
	// payload structs (a value, never a pointer).
	Data Payload
}

// Type is the stable type name of the event's payload.
func (e Event) Type() string {
	if e.Data == nil {
		return ""
	}
	return e.Data.EventType()
}

// Schema is the schema version of the event's payload.
func (e Event) Schema() int {
	if e.Data == nil {
		return 0
	}
	return e.Data.SchemaVersion()
}

// Validate reports what makes the envelope unfit for the log.
func (e Event) Validate() error {
	var errs []error
	if _, err := ulid.ParseStrict(e.ID); err != nil {
		errs = append(errs, fmt.Errorf("event id %q is not a ULID", e.ID))
	}
	if err := ValidateJobID(e.JobID); err != nil {
		errs = append(errs, err)
	}
	if e.Version == 0 {
		errs = append(errs, errors.New("version must be 1 or more"))
	}
	if e.Time.IsZero() {
		errs = append(errs, errors.New("time is missing"))
	}
	if e.Data == nil {
		errs = append(errs, errors.New("payload is missing"))
	} else if _, ok := kinds[e.Data.EventType()]; !ok {
		errs = append(errs, fmt.Errorf("unknown event type %q", e.Data.EventType()))
	}
	return errors.Join(errs...)
}

// MaxJobIDLen bounds a job id so that its subject stays short.
const MaxJobIDLen = 64

// ValidateJobID checks that a job id is usable as one NATS subject token:
// 1 to 64 characters from [a-z0-9_-].
func ValidateJobID(id string) error {
	if id == "" {
		return errors.New("job id is empty")
	}
	if len(id) > MaxJobIDLen {
		return fmt.Errorf("job id is longer than %d characters", MaxJobIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("job id %q has a character outside [a-z0-9_-]", id)
		}
	}
	return nil
}
