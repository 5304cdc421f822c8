package nats

import (
	"context"
	"errors"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"
)

// Log reads one stream in order: serpent's event log (EventLog), or any
// stream and filter (NewLog). It is the one reader of the log that the
// projections, the tally's fold, the audit and the chaos runs share, so
// they agree on what the log holds. Get reads a range with batched direct
// gets (a gap, a job's history), Read a range with an ordered consumer (a
// replay), and Follow goes on as the log grows. None needs more than read
// access to the stream.
type Log struct {
	js     jetstream.JetStream
	stream string
	filter string
}

// Message is one message of a stream as a Log hands it on.
type Message struct {
	Seq     uint64
	Subject string
	Header  natsgo.Header
	Data    []byte
	// Time is when the server stored it.
	Time time.Time
	// Pending is how many messages of the filter came after it when the
	// server sent it: 0 is the log's end for now. Read and Follow set it;
	// Get does not.
	Pending uint64
}

// EventLog is SERP_EVENTS, every job's subject.
func EventLog(js jetstream.JetStream) Log {
	return Log{js: js, stream: EventStream, filter: EventSubjectPrefix + ">"}
}

// NewLog is the messages of stream on filter.
func NewLog(js jetstream.JetStream, stream, filter string) Log {
	return Log{js: js, stream: stream, filter: filter}
}

// Subject is l narrowed to one subject: a job's, say.
func (l Log) Subject(subject string) Log {
	l.filter = subject
	return l
}

// Last is the stream's last sequence now: where a read of the log as it
// stands ends.
func (l Log) Last(ctx context.Context) (uint64, error) {
	s, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return 0, fmt.Errorf("nats: stream %s: %w", l.stream, err)
	}
	return s.CachedInfo().State.LastSeq, nil
}

// Get reads the messages from..to (inclusive) with batched direct gets.
// A direct get may be answered by a replica a moment behind the leader:
// a caller that needs every message up to to checks it got them. A batch
// that is not answered in time is an error, never the range's end.
func (l Log) Get(ctx context.Context, from, to uint64) ([]Message, error) {
	var out []Message
	for from <= to {
		n := int(min(to-from+1, 1000))
		msgs, err := jetstreamext.GetBatch(ctx, l.js, l.stream, n, jetstreamext.GetBatchSeq(from), jetstreamext.GetBatchSubject(l.filter))
		if err != nil {
			return nil, fmt.Errorf("nats: read %s from %d: %w", l.stream, from, err)
		}
		got, done := 0, false
		for m, err := range msgs {
			if errors.Is(err, jetstreamext.ErrNoMessages) {
				done = true // none from here on
				break
			}
			if err != nil {
				return nil, fmt.Errorf("nats: read %s from %d: %w", l.stream, from, err)
			}
			if m.Sequence > to {
				done = true
				break
			}
			out = append(out, Message{Seq: m.Sequence, Subject: m.Subject, Header: m.Header, Data: m.Data, Time: m.Time})
			from = m.Sequence + 1
			got++
		}
		if done {
			break
		}
		if got == 0 {
			// A batch's answers end quietly when its request times out
			// (jetstreamext.GetBatch): no message and no "none" is no
			// answer, not the range's end.
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("nats: read %s from %d: %w", l.stream, from, err)
			}
			return nil, fmt.Errorf("nats: read %s from %d: no answer in time", l.stream, from)
		}
	}
	return out, nil
}
