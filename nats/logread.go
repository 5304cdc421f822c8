package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Read reads l from sequence from up to sequence to (0: the last one when
// the read starts), in order, with an ordered consumer, and hands the
// messages to fn in chunks of up to chunk (never an empty one). It
// returns the last sequence it was asked to reach. Messages are handed
// over while the next ones arrive, so fn's work overlaps the read's.
func (l Log) Read(ctx context.Context, from, to uint64, chunk int, fn func([]Message) error) (uint64, error) {
	s, err := l.js.Stream(ctx, l.stream)
	if err != nil {
		return 0, fmt.Errorf("nats: stream %s: %w", l.stream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(l.filter))
	if err != nil {
		return 0, fmt.Errorf("nats: stream %s: %w", l.stream, err)
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
	if first, err := firstMatch(ctx, s, l.filter, from); err != nil {
		return 0, err
	} else if first == 0 || first > to {
		return to, nil
	}
	cons, err := l.js.OrderedConsumer(ctx, l.stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{l.filter},
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: from})
	if err != nil {
		return 0, fmt.Errorf("nats: read %s: %w", l.stream, err)
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
		msg, err := delivered(m)
		if err != nil {
			done = true
			failed <- err
			return
		}
		if msg.Seq <= to {
			buf = append(buf, msg)
		}
		last := msg.Seq >= to || msg.Pending == 0
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
		return 0, fmt.Errorf("nats: read %s: %w", l.stream, err)
	}
	defer func() {
		close(quit) // a callback blocked on a full channel gives up
		cc.Stop()
		dropConsumer(ctx, l.js, l.stream, cons)
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
			return 0, fmt.Errorf("nats: read %s: %w", l.stream, err)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// dropConsumer deletes an ordered consumer that is done. Stopped, it
// would stay on the server for its inactive threshold (5 minutes), and a
// stream takes 1,000 consumers by default: many reads in a row, such as
// an audit's of many jobs, would be refused.
func dropConsumer(ctx context.Context, js jetstream.JetStream, stream string, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, stream, info.Name)
}

// firstMatch is the sequence of the first message of s matching filter
// at or after from, 0 if there is none.
func firstMatch(ctx context.Context, s jetstream.Stream, filter string, from uint64) (uint64, error) {
	m, err := s.GetMsg(ctx, from, jetstream.WithGetMsgSubject(filter))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("nats: read %s from %d: %w", s.CachedInfo().Config.Name, from, err)
	}
	return m.Sequence, nil
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
