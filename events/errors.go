package events

import "fmt"

// DecodeError says which event could not be decoded and why. Type, Schema
// and JobID are filled as far as the data allowed.
type DecodeError struct {
	Type   string
	Schema int
	JobID  string
	Err    error
}

func (e *DecodeError) Error() string {
	typ := e.Type
	if typ == "" {
		typ = "event of unknown type"
	}
	job := e.JobID
	if job == "" {
		job = "?"
	}
	return fmt.Sprintf("events: cannot decode %s (schema %d) of job %s: %v", typ, e.Schema, job, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Sentinels wrapped by DecodeError, for errors.Is.
var (
	ErrUnknownType   = fmt.Errorf("unknown event type")
	ErrNewerSchema   = fmt.Errorf("schema is newer than this code knows")
	ErrMalformed     = fmt.Errorf("malformed event")
	ErrMissingUpcast = fmt.Errorf("no upcaster for an old schema")
)
