package projector

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/projections"
)

// Message is one message of a stream as the readers pass it on.
type Message struct {
	Seq     uint64
	Subject string
	Header  natsgo.Header
	Data    []byte
	Time    time.Time
}

// DecodeEvents reads the events of a message strictly and checks they
// belong where they are stored: the job its subject names, and its header
// (events.DecodeMessage). A message holds one event, or the group of an
// append written as one message; the records of a group share the
// message's sequence. Without a subject (a recorded log) only the events
// and the header are read. light leaves results out
// (events.DecodeMessageLight). Errors are *eventstore.CorruptError. prefix is
// what comes before the job id in the subject (for SERP_EVENTS,
// snats.EventSubjectPrefix). The runner, the audit and the metrics' fold
// (metrics.Follow) all read the log with it, so they agree on what is an
// event.
func DecodeEvents(prefix string, m Message, light bool) ([]projections.Record, error) {
	jobID := strings.TrimPrefix(m.Subject, prefix)
	decode := events.DecodeMessage
	if light {
		decode = events.DecodeMessageLight
	}
	evs, err := decode(m.Header, m.Data)
	if err == nil && m.Subject != "" && evs[0].JobID != jobID {
		err = fmt.Errorf("event %s of job %s is stored on %s", evs[0].ID, evs[0].JobID, m.Subject)
	}
	if err != nil {
		return nil, &eventstore.CorruptError{JobID: jobID, Seq: m.Seq, Err: err}
	}
	recs := make([]projections.Record, len(evs))
	for i, e := range evs {
		recs[i] = projections.Record{Seq: m.Seq, Event: e}
	}
	return recs, nil
}

// readRange reads the messages from..to (inclusive) matching filter with
// batched direct gets: how a runner fills a gap in its deliveries.
func readRange(ctx context.Context, js jetstream.JetStream, stream, filter string, from, to uint64) ([]Message, error) {
	var out []Message
	for from <= to {
		n := int(min(to-from+1, 1000))
		msgs, err := jetstreamext.GetBatch(ctx, js, stream, n, jetstreamext.GetBatchSeq(from), jetstreamext.GetBatchSubject(filter))
		if err != nil {
			return nil, fmt.Errorf("projector: read %s from %d: %w", stream, from, err)
		}
		got, done := 0, false
		for m, err := range msgs {
			if errors.Is(err, jetstreamext.ErrNoMessages) {
				done = true // none from here on
				break
			}
			if err != nil {
				return nil, fmt.Errorf("projector: read %s from %d: %w", stream, from, err)
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
				return nil, fmt.Errorf("projector: read %s from %d: %w", stream, from, err)
			}
			return nil, fmt.Errorf("projector: read %s from %d: no answer in time", stream, from)
		}
	}
	return out, nil
}

// firstMatch is the sequence of the first message of s matching filter
// at or after from, 0 if there is none.
func firstMatch(ctx context.Context, s jetstream.Stream, filter string, from uint64) (uint64, error) {
	m, err := s.GetMsg(ctx, from, jetstream.WithGetMsgSubject(filter))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("projector: read %s from %d: %w", s.CachedInfo().Config.Name, from, err)
	}
	return m.Sequence, nil
}

// ReadStream reads a stream's messages matching filter from sequence from
// up to sequence to (0: the last one when the read starts), in order, with
// an ordered consumer, and hands them to fn in chunks of up to chunk
// messages (never an empty one). It returns the last sequence it was
// asked to reach.
func ReadStream(ctx context.Context, js jetstream.JetStream, stream, filter string, from, to uint64, chunk int,
	fn func([]Message) error) (uint64, error) {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("projector: stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, fmt.Errorf("projector: stream %s: %w", stream, err)
	}
	if to == 0 || to > info.State.LastSeq {
		to = info.State.LastSeq
	}
	from = max(from, info.State.FirstSeq, 1)
	if from > to || info.State.Msgs == 0 {
		return to, nil
	}
	// The stream's counts are not the filter's: without a matching
	// message in range, an ordered consumer would wait for one forever.
	if first, err := firstMatch(ctx, s, filter, from); err != nil {
		return 0, err
	} else if first == 0 || first > to {
		return to, nil
	}
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return 0, fmt.Errorf("projector: read %s: %w", stream, err)
	}
	chunks := make(chan []Message, 4)
	failed := make(chan error, 1)
	quit := make(chan struct{})
	var buf []Message
	done := false
	send := func(c []Message) bool {
		select {
		case chunks <- c:
			return true
		case <-quit:
			done = true
			return false
		}
	}
	// The callback runs on one goroutine, in order; it only hands chunks
	// over, so decoding and checking happen while the next ones arrive.
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if done {
			return
		}
		seq, pending, ts, ok := ackInfo(m.Reply())
		if !ok {
			meta, err := m.Metadata()
			if err != nil {
				done = true
				failed <- err
				return
			}
			seq, pending, ts = meta.Sequence.Stream, meta.NumPending, meta.Timestamp.UnixNano()
		}
		if seq <= to {
			buf = append(buf, Message{Seq: seq, Subject: m.Subject(), Header: m.Headers(), Data: m.Data(), Time: time.Unix(0, ts)})
		}
		last := seq >= to || pending == 0
		if len(buf) >= chunk || last && len(buf) > 0 {
			if !send(buf) {
				return
			}
			buf = nil
		}
		if last {
			done = true
			close(chunks)
		}
	}, jetstream.PullMaxMessages(max(2*chunk, 1000)), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		// The ordered consumer recreates itself after missed heartbeats
		// and the like; only a closed connection ends the read.
		if errors.Is(err, natsgo.ErrConnectionClosed) {
			select {
			case failed <- err:
			default:
			}
		}
	}))
	if err != nil {
		return 0, fmt.Errorf("projector: read %s: %w", stream, err)
	}
	defer func() {
		close(quit) // a callback blocked on a full channel gives up
		cc.Stop()
	}()
	for {
		select {
		case c, ok := <-chunks:
			if !ok {
				return to, nil
			}
			if err := fn(c); err != nil {
				return 0, err
			}
		case err := <-failed:
			return 0, fmt.Errorf("projector: read %s: %w", stream, err)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// ackInfo reads the stream sequence, the pending count and the timestamp
// from a delivery's reply subject ($JS.ACK.[domain.hash.]stream.consumer.
// delivered.sseq.cseq.ts.pending[.token]) without the allocations of
// Msg.Metadata, which counts when a whole log is read.
func ackInfo(reply string) (seq, pending uint64, ts int64, ok bool) {
	var tok [12]string
	n := 0
	for n < len(tok) {
		i := strings.IndexByte(reply, '.')
		if i < 0 {
			tok[n] = reply
			n++
			break
		}
		tok[n], reply = reply[:i], reply[i+1:]
		n++
	}
	base := 0
	switch {
	case n == 9:
		base = 2
	case n >= 11:
		base = 4
	default:
		return 0, 0, 0, false
	}
	if tok[0] != "$JS" || tok[1] != "ACK" {
		return 0, 0, 0, false
	}
	seq, err1 := strconv.ParseUint(tok[base+3], 10, 64)
	t, err2 := strconv.ParseInt(tok[base+5], 10, 64)
	pending, err3 := strconv.ParseUint(tok[base+6], 10, 64)
	return seq, pending, t, err1 == nil && err2 == nil && err3 == nil
}
