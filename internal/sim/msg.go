package sim

import (
	"errors"
	"time"

	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
)

// simMsg is one delivery of a message of the world's queue to one task, as
// the engine's delivery handlers (engine.Engine.HandleWork and
// HandleCommand) get it from JetStream (engine.Msg). Its settlements go to the queue
// through the scheduler (a yield at ptAck, where an acknowledgement may be
// lost or late, or the process die); its keep-alives restart the ack wait
// unless the delivery's keep-alives are lost.
//
// It is used by its task's goroutine only.
type simMsg struct {
	w *World
	t *task
	// delivered is the message's delivery count as of this delivery.
	delivered uint64
	// lostKeepAlive: the delivery's keep-alives never reach the server.
	lostKeepAlive bool
	// acked: settled once (acknowledged, negatively or not, or terminated);
	// JetStream's client refuses a second settlement.
	acked bool
}

var _ engine.Msg = (*simMsg)(nil)

// errSettled is a second settlement of one delivery, which JetStream's
// client refuses.
var errSettled = errors.New("sim: the delivery is settled already")

// stream is the stream the message is on.
func (m *simMsg) stream() string {
	if m.t.msg.cmd != nil {
		return snats.CommandStream
	}
	return snats.WorkStream
}

// Info is where the message is: its sequence on its stream, this
// delivery's count, and when the message was stored (a wake-up: when its
// timer fired), by the world's one clock.
func (m *simMsg) Info() (engine.MsgInfo, error) {
	return engine.MsgInfo{Stream: m.stream(), Seq: m.t.msg.seq, Delivered: m.delivered, Stored: m.t.msg.stored}, nil
}

// Data is a command's payload; a wake-up has none.
func (m *simMsg) Data() []byte {
	if c := m.t.msg.cmd; c != nil {
		return c.payload
	}
	return nil
}

// Subject is serp.work.<job> for a wake-up, the command's subject for a
// command.
func (m *simMsg) Subject() string {
	if c := m.t.msg.cmd; c != nil {
		return c.subject
	}
	return snats.WorkSubjectPrefix + m.t.msg.job
}

func (m *simMsg) Ack() error                         { return m.settle(ack, 0) }
func (m *simMsg) NakWithDelay(d time.Duration) error { return m.settle(nak, d) }
func (m *simMsg) Term() error                        { return m.settle(term, 0) }

// InProgress restarts the delivery's ack wait, unless its keep-alives are
// lost, or its process is dead or paused (a paused process sends nothing).
func (m *simMsg) InProgress() error {
	if m.acked {
		return errSettled
	}
	if m.lostKeepAlive {
		return nil // sent, never arrived
	}
	w, t := m.w, m.t
	w.mu.Lock()
	defer w.mu.Unlock()
	if now := time.Now(); !t.dead && !t.worker.paused(now) {
		w.q.keepAlive(t.msg, now, w.cfg.AckWait)
	}
	return nil
}

// settle settles the delivery through the scheduler (see World.settle). A
// lost or late acknowledgement is no error to the engine, as with
// JetStream's fire-and-forget acknowledgements; a dead process's is.
func (m *simMsg) settle(how settlement, delay time.Duration) error {
	if m.acked {
		return errSettled
	}
	if !m.w.settle(m.t, how, delay) {
		return errDead
	}
	m.acked = true
	return nil
}
