package store

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/serpent-engine/serpent/events"
)

// Header names a store writes with every event besides events.HeaderType
// and events.HeaderSchema. They are JetStream's: the event id is the
// message id the server deduplicates on, and the expected version is the
// optimistic concurrency check.
const (
	HeaderMsgID       = "Nats-Msg-Id"
	HeaderExpectedSeq = "Nats-Expected-Last-Subject-Sequence"
)

// Message is an event as the log holds it: the encoded event and the
// headers stored with it. Both stores build messages with EncodeAppend and
// size them with Size, so they refuse exactly the same appends.
type Message struct {
	Type   string // event type, for error messages
	ID     string // event id
	Header map[string][]string
	Data   []byte
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
		h := map[string][]string{
			HeaderMsgID:         {e.ID},
			events.HeaderType:   {e.Type()},
			events.HeaderSchema: {strconv.Itoa(e.Schema())},
		}
		if i == 0 {
			h[HeaderExpectedSeq] = []string{strconv.FormatUint(expected, 10)}
		}
		msgs = append(msgs, Message{Type: e.Type(), ID: e.ID, Header: h, Data: data})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return msgs, nil
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
				ErrTooLarge, m.Type, m.ID, jobID, size, limit)
		}
	}
	return nil
}
