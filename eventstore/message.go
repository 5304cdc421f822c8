package eventstore

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/serpent-engine/serpent/events"
)

// Message is what a store writes for an append: an encoded event, or a
// group of them, and its header (events.Header). Both stores build
// messages with EncodeAppend and Pack and size them with Size, so they
// refuse exactly the same appends.
type Message struct {
	Type   string   // the HeaderType value: event types, joined for a group
	IDs    []string // the ids of the events it holds, in order
	Header map[string][]string
	Data   []byte
	// TTL is how long the store keeps the message (SetTTL); 0 for ever.
	TTL time.Duration
}

// ID is the message id: the (first) event's id.
func (m Message) ID() string {
	if len(m.IDs) == 0 {
		return ""
	}
	return m.IDs[0]
}

// EncodeAppend checks an append and encodes it into the messages a store
// writes, in order. Every event must belong to jobID, encode, carry an id
// not used earlier in the append and a version one above the previous
// event's. The first message carries the expected version. Errors wrap
// ErrInvalid or ErrDuplicate; nothing has been written when they happen.
func EncodeAppend(jobID string, expected uint64, evs []events.Event) ([]Message, error) {
	if err := events.ValidateJobID(jobID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("%w: append to job %s has no events", ErrInvalid, jobID)
	}
	var errs []error
	msgs := make([]Message, 0, len(evs))
	seen := make(map[string]bool, len(evs))
	for i, e := range evs {
		if e.JobID != jobID {
			errs = append(errs, fmt.Errorf("%w: event %d (%s %s) belongs to job %q, not %s", ErrInvalid, i, e.Type(), e.ID, e.JobID, jobID))
			continue
		}
		if i > 0 && e.Version != evs[i-1].Version+1 {
			errs = append(errs, fmt.Errorf("%w: event %d (%s) of job %s has version %d after %d", ErrInvalid, i, e.Type(), jobID, e.Version, evs[i-1].Version))
		}
		if seen[e.ID] {
			errs = append(errs, fmt.Errorf("%w: event id %s appears twice in one append to job %s", ErrDuplicate, e.ID, jobID))
		}
		seen[e.ID] = true
		data, err := events.Encode(e)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalid, err))
			continue
		}
		h := events.Header(e)
		if i == 0 {
			h[events.HeaderExpectedSeq] = []string{strconv.FormatUint(expected, 10)}
		}
		msgs = append(msgs, Message{Type: e.Type(), IDs: []string{e.ID}, Header: h, Data: data})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return msgs, nil
}

// Pack returns the messages an append is written as, given the messages
// EncodeAppend built for it: one message holding all its events
// (events.Group, events.JoinHeaders) when that message fits in limit,
// msgs unchanged otherwise, to go as an atomic batch. One message is all
// or none by itself, and on a single server it costs a plain publish
// where a batch is first staged on disk.
func Pack(msgs []Message, limit int) []Message {
	if len(msgs) < 2 {
		return msgs
	}
	bodies := make([][]byte, len(msgs))
	headers := make([]map[string][]string, len(msgs))
	var ids []string
	for i, m := range msgs {
		bodies[i], headers[i] = m.Data, m.Header
		ids = append(ids, m.IDs...)
	}
	h := events.JoinHeaders(headers)
	packed := Message{Type: h[events.HeaderType][0], IDs: ids, Header: h, Data: events.Group(bodies)}
	if packed.Size() > limit {
		return msgs
	}
	return []Message{packed}
}

// Size is what the message counts against the log's limit: its data plus
// its header block exactly as NATS writes it ("NATS/1.0\r\n", one
// "Key: value\r\n" line per value, a closing "\r\n").
func (m Message) Size() int { return HeaderSize(m.Header) + len(m.Data) }

// HeaderSize is the length of a NATS header block; 0 without headers.
func HeaderSize(h map[string][]string) int {
	if len(h) == 0 {
		return 0
	}
	n := len("NATS/1.0\r\n") + len("\r\n")
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(": ") + len(v) + len("\r\n")
		}
	}
	return n
}

// Lengths of the headers JetStream's atomic batch publish adds to every
// message of a batch (see BatchOverhead).
const (
	batchIDHeaderLen  = len("Nats-Batch-Id: ") + 22 + len("\r\n") // a NUID is 22 characters
	batchSeqHeaderLen = len("Nats-Batch-Sequence: ") + len("\r\n")
	batchCommitLen    = len("Nats-Batch-Commit: 1\r\n")
)

// BatchOverhead is what the atomic batch headers add to message i (from 0)
// of an n-message batch: the batch id, the batch sequence and, on the last
// message, the commit marker. A one-message append is a plain publish and
// has none.
func BatchOverhead(i, n int) int {
	if n <= 1 {
		return 0
	}
	o := batchIDHeaderLen + batchSeqHeaderLen + len(strconv.Itoa(i+1))
	if i == n-1 {
		o += batchCommitLen
	}
	return o
}

// CheckSize refuses an append (as built by EncodeAppend) one of whose
// messages, with its batch headers, is larger than limit. The error wraps
// ErrTooLarge and names the job, the event, its size and the limit.
func CheckSize(jobID string, msgs []Message, limit int) error {
	for i, m := range msgs {
		size := m.Size() + BatchOverhead(i, len(msgs))
		if size > limit {
			return fmt.Errorf("%w: %s event %s of job %s takes %d bytes in the log, the limit is %d",
				ErrTooLarge, m.Type, m.ID(), jobID, size, limit)
		}
	}
	return nil
}

// IDs lists the event ids of an append's messages, in order.
func IDs(msgs []Message) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.IDs...)
	}
	return out
}

// Landing is how the messages found after an append's expected version
// compare with the append.
type Landing int

const (
	// Short: the messages found so far hold the append's first events
	// and no others; more must be read to tell.
	Short Landing = iota
	// Landed: they hold exactly the append's events, ending with a
	// message.
	Landed
	// Other: they hold other events, or the append's events end inside
	// a message (part of a group is not the whole).
	Other
)

// Match compares the event ids of the messages found right after an
// append's expected version (found, each message's ids, in order) with
// the append's (want). An append is found whichever form it was written
// in: one message, or a message per event.
func Match(want []string, found [][]string) Landing {
	for _, ids := range found {
		if len(ids) == 0 || len(ids) > len(want) {
			return Other // every message holds an event
		}
		for i, id := range ids {
			if want[i] != id {
				return Other
			}
		}
		want = want[len(ids):]
		if len(want) == 0 {
			return Landed
		}
	}
	return Short
}
