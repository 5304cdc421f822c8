package sim

import (
	"bytes"
	"context"
	"errors"

	"github.com/serpent-engine/serpent/engine"
)

// taskRejections is SERP_REJECTED as one intake task sees it: the engine
// records a refused command there (engine.Rejections). The scheduler may
// fail the record (nothing recorded, the command is asked again) or kill
// the process first.
type taskRejections struct {
	w *World
	t *task
}

var _ engine.Rejections = taskRejections{}

func (r taskRejections) Reject(_ context.Context, rej engine.Rejection) error {
	if err := r.w.recordRejection(r.t, rej.Reason); err != nil {
		return err
	}
	r.w.mu.Lock()
	defer r.w.mu.Unlock()
	// The record must be the command's: its sequence, its payload.
	seq := r.t.msg.seq
	if rej.Seq != seq {
		r.w.rep.fail("command %d: its rejection record names command %d", seq, rej.Seq)
	}
	if !bytes.Equal(rej.Payload, r.t.msg.cmd.payload) {
		r.w.rep.fail("command %d: its rejection record does not carry its payload", seq)
	}
	return nil
}

// errRejectFailed is a rejection record the scheduler did not let through.
var errRejectFailed = errors.New("sim: SERP_REJECTED is unreachable")

// recordRejection records that t's command was refused for reason, once the
// scheduler lets it (ptReject). One record per command: its sequence is the
// record's message id, so a second is the same record.
func (w *World) recordRejection(t *task, reason string) error {
	switch w.yield(t, ptReject) {
	case vDead:
		return errDead
	case vFail:
		return errRejectFailed
	}
	w.mu.Lock()
	t.msg.cmd.rejected = reason
	w.mu.Unlock()
	return nil
}
