package nats

import (
	"context"
	"encoding/json"
	"fmt"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EachSubject calls each with every subject of stream that matches filter
// and holds a message. It reads the stream's index of subjects, 100,000
// subjects a request, and loads no message, so it costs the server no
// block reads however many subjects there are (a look-up per subject
// loads the message's block). Subjects that come or go while it reads may
// be missed or seen twice: the pages are of the index as each request
// finds it.
func EachSubject(ctx context.Context, js jetstream.JetStream, stream, filter string, each func(subject string)) error {
	subject := apiPrefix(js.Options()) + "STREAM.INFO." + stream
	for offset := 0; ; {
		body, err := json.Marshal(subjectsRequest{Filter: filter, Offset: offset})
		if err != nil {
			return err
		}
		rctx, cancel := withRequestTimeout(ctx, js)
		reply, err := js.Conn().RequestWithContext(rctx, subject, body)
		cancel()
		if err != nil {
			return fmt.Errorf("nats: subjects %s of stream %s: %w", filter, stream, err)
		}
		var resp subjectsResponse
		if err := json.Unmarshal(reply.Data, &resp); err != nil {
			return fmt.Errorf("nats: subjects %s of stream %s: %w", filter, stream, err)
		}
		if resp.Error != nil {
			return fmt.Errorf("nats: subjects %s of stream %s: %w", filter, stream, resp.Error)
		}
		for s := range resp.State.Subjects {
			each(s)
		}
		offset += len(resp.State.Subjects)
		if len(resp.State.Subjects) == 0 || offset >= resp.Total {
			return nil
		}
	}
}

type subjectsRequest struct {
	Filter string `json:"subjects_filter"`
	Offset int    `json:"offset,omitempty"`
}

type subjectsResponse struct {
	Error *jetstream.APIError `json:"error,omitempty"`
	Total int                 `json:"total"`
	State struct {
		Subjects map[string]uint64 `json:"subjects"`
	} `json:"state"`
}

// LastHeader is the header of subject's last message in stream, as the
// stream's leader says (a direct get may be answered by any replica, one
// that has not stored the latest writes included); ok is false when the
// subject holds no message.
func LastHeader(ctx context.Context, js jetstream.JetStream, stream, subject string) (h natsgo.Header, ok bool, err error) {
	m, err := leaderGet(ctx, js, stream, msgGetRequest{LastFor: subject})
	if err != nil || m == nil {
		return nil, false, err
	}
	return m.Header, true, nil
}
