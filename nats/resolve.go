package nats

import (
	"context"
	"encoding/json"
	"fmt"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/store"
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
// served by a replica that is behind). It returns the sequence of our last
// event when it landed.
func (s *EventStore) resolve(ctx context.Context, jobID string, expected uint64, msgs []store.Message) (uint64, landing, error) {
	subj := s.subject(jobID)
	seq := expected
	for i, m := range msgs {
		got, err := s.leaderGet(ctx, msgGetRequest{Seq: seq + 1, NextFor: subj})
		if err != nil {
			return 0, unchanged, err
		}
		if got == nil && i == 0 {
			last, err := s.leaderGet(ctx, msgGetRequest{LastFor: subj})
			if err != nil {
				return 0, unchanged, err
			}
			if last == nil && expected == 0 || last != nil && last.Sequence == expected {
				return 0, unchanged, nil
			}
			return 0, moved, nil
		}
		if got != nil && got.Header.Get(store.HeaderMsgID) == m.ID {
			seq = got.Sequence
			continue
		}
		if i == 0 {
			return 0, moved, nil
		}
		// Batches are all or none; a part of ours can only be a read
		// racing the write. Look again later.
		return 0, unchanged, fmt.Errorf("only %d of the %d events appended to job %s are readable yet", i, len(msgs), jobID)
	}
	return seq, landed, nil
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
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.js.Options().DefaultTimeout)
		defer cancel()
	}
	reply, err := s.nc.RequestWithContext(ctx, s.apiPrefix+"STREAM.MSG.GET."+s.opts.Stream, body)
	if err != nil {
		return nil, fmt.Errorf("nats: read from the leader of stream %s: %w", s.opts.Stream, err)
	}
	var resp msgGetResponse
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		return nil, fmt.Errorf("nats: read from the leader of stream %s: %w", s.opts.Stream, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, nil
		}
		return nil, fmt.Errorf("nats: read from the leader of stream %s: %w", s.opts.Stream, resp.Error)
	}
	if resp.Message == nil {
		return nil, fmt.Errorf("nats: read from the leader of stream %s: empty answer", s.opts.Stream)
	}
	var hdr natsgo.Header
	if len(resp.Message.Header) > 0 {
		if hdr, err = natsgo.DecodeHeadersMsg(resp.Message.Header); err != nil {
			return nil, fmt.Errorf("nats: headers of message %d: %w", resp.Message.Sequence, err)
		}
	}
	return &jetstream.RawStreamMsg{Subject: resp.Message.Subject, Sequence: resp.Message.Sequence, Header: hdr, Data: resp.Message.Data}, nil
}
