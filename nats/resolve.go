package nats

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// landing is what a re-read found after the expected version.
type landing int

const (
	unchanged landing = iota // the job is still at the expected version
	landed                   // our events are right after it
	moved                    // someone else's are, or the job is elsewhere
)

// resolve finds out whether an append happened by reading the job's
// messages after expected from the stream leader (direct gets may be
// served by a replica that is behind): it landed when the events right
// after expected are its events, whatever form they were written in
// (eventstore.Match; part of a group is not the whole). It returns the
// sequence of the message holding our last event when it landed.
func (s *EventStore) resolve(ctx context.Context, jobID string, expected uint64, msgs []eventstore.Message) (uint64, landing, error) {
	subj := s.subject(jobID)
	want := eventstore.IDs(msgs)
	var found [][]string
	for seq := expected; ; {
		got, err := s.leaderGet(ctx, msgGetRequest{Seq: seq + 1, NextFor: subj})
		if err != nil {
			return 0, unchanged, err
		}
		if got == nil && len(found) == 0 {
			last, err := s.leaderGet(ctx, msgGetRequest{LastFor: subj})
			if err != nil {
				return 0, unchanged, err
			}
			if last == nil && expected == 0 || last != nil && last.Sequence == expected {
				return 0, unchanged, nil
			}
			return 0, moved, nil
		}
		if got == nil {
			if slices.ContainsFunc(found, func(ids []string) bool { return len(ids) > 1 }) {
				return 0, moved, nil // our append is one message or one per event: a group that is part of it is not it
			}
			// Batches are all or none; a part of ours can only be a
			// read racing the write. Look again later.
			return 0, unchanged, fmt.Errorf("only %d of the %d events appended to job %s are readable yet", countIDs(found), len(want), jobID)
		}
		ids, err := events.MessageIDs(got.Header, got.Data)
		if err != nil {
			return 0, moved, nil // not ours: ours decode
		}
		found, seq = append(found, ids), got.Sequence
		switch eventstore.Match(want, found) {
		case eventstore.Landed:
			return seq, landed, nil
		case eventstore.Other:
			// A batch is stored whole at consecutive sequences: part of
			// ours followed by other events is not ours.
			return 0, moved, nil
		}
	}
}

func countIDs(found [][]string) int {
	n := 0
	for _, ids := range found {
		n += len(ids)
	}
	return n
}

type msgGetRequest struct {
	Seq     uint64 `json:"seq,omitempty"`
	NextFor string `json:"next_by_subj,omitempty"`
	LastFor string `json:"last_by_subj,omitempty"`
}

type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string `json:"subject"`
		Sequence uint64 `json:"seq"`
		Header   []byte `json:"hdrs,omitempty"`
		Data     []byte `json:"data,omitempty"`
	} `json:"message,omitempty"`
}

// leaderGet reads one message through the stream leader's message-get API
// (not a direct get); nil when there is none.
func (s *EventStore) leaderGet(ctx context.Context, req msgGetRequest) (*jetstream.RawStreamMsg, error) {
	return leaderGet(ctx, s.js, s.opts.Stream, req)
}

// leaderGet reads one message of stream through its leader's message-get
// API: a direct get may be answered by any replica, one that has not
// stored the latest writes included. nil when there is none.
func leaderGet(ctx context.Context, js jetstream.JetStream, stream string, req msgGetRequest) (*jetstream.RawStreamMsg, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ctx, cancel := withRequestTimeout(ctx, js)
	defer cancel()
	reply, err := js.Conn().RequestWithContext(ctx, apiPrefix(js.Options())+"STREAM.MSG.GET."+stream, body)
	if err != nil {
		return nil, fmt.Errorf("nats: read from the leader of stream %s: %w", stream, err)
	}
	var resp msgGetResponse
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("nats: read from the leader of stream %s: %w", stream, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, nil
		}
		return nil, fmt.Errorf("nats: read from the leader of stream %s: %w", stream, resp.Error)
	}
	if resp.Message == nil {
		return nil, fmt.Errorf("nats: read from the leader of stream %s: empty answer", stream)
	}
	var hdr natsgo.Header
	if len(resp.Message.Header) > 0 {
		if hdr, err = natsgo.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("nats: headers of message %d: %w", resp.Message.Sequence, err)
		}
	}
	return &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Header: hdr, Data: resp.Message.Data}, nil
}

// withRequestTimeout bounds a request by js's default timeout when ctx
// has no deadline of its own.
func withRequestTimeout(ctx context.Context, js jetstream.JetStream) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, js.Options().DefaultTimeout)
}

// LeaderHolds counts the messages on filter that stream's leader holds
// between from and to (inclusive), with its message-get API: one request
// per message found, plus one. On a log with message TTLs it tells a
// hole left by expired messages from a replica that is behind.
func LeaderHolds(ctx context.Context, js jetstream.JetStream, stream, filter string, from, to uint64) (int, error) {
	n := 0
	for seq := from; seq <= to; n++ {
		m, err := leaderGet(ctx, js, stream, msgGetRequest{Seq: seq, NextFor: filter})
		if err != nil {
			return 0, err
		}
		if m == nil || m.Sequence > to {
			return n, nil
		}
		seq = m.Sequence + 1
	}
	return n, nil
}
