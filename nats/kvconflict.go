package nats

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// IsCASConflict reports a compare-and-set write to a KV bucket refused
// because the key moved on, however the client says it: ErrKeyExists (a
// Create, or an Update on a single server), ErrKeyRevisionMismatch (an
// Update or a Delete with a revision on a replicated bucket, where the
// server answers 10164, which ErrKeyExists does not match), or the
// server's own "wrong last sequence" (a Create over a deleted key returns
// it as it is). On a replicated bucket 10164 also means another write to
// the key was in flight: the caller reads the key again either way.
func IsCASConflict(err error) bool {
	if errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
