package engine

import (
	"context"

	"github.com/serpent-engine/serpent/aggregate"
)

// Rejections is where a refused command's record goes (serp.rejected.
// <reason> on SERP_REJECTED in package nats; the simulation has its own).
// A command has one record: a second of the same command (its Seq) is the
// same record.
type Rejections interface {
	Reject(ctx context.Context, r Rejection) error
}

// Rejection is the record of a refused command: the command as it came,
// and why it was refused.
type Rejection struct {
	// Subject, Seq and Payload are the command's: the subject it was
	// published on, its sequence in its stream, its bytes.
	Subject string
	Seq     uint64
	Payload []byte
	// Reason is the token of the record's subject, Error says why for
	// people, and Fields name the fields at fault.
	Reason string
	Error  string
	Fields []aggregate.FieldError
}
