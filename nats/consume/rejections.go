package consume

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
)

// Rejections records refused commands on serp.rejected.<reason>
// (SERP_REJECTED), one record per command: the record's message id is
// the command's sequence.
type Rejections struct {
	js jetstream.JetStream
	// maxPayload is the largest message the server takes.
	maxPayload int64
}

var _ engine.Rejections = (*Rejections)(nil)

// NewRejections records refused commands with js.
func NewRejections(js jetstream.JetStream) *Rejections {
	limit := int64(defaultMaxPayload)
	if nc := js.Conn(); nc != nil {
		limit = nc.MaxPayload()
	}
	return &Rejections{js: js, maxPayload: limit}
}

// defaultMaxPayload is the NATS server's default max_payload.
const defaultMaxPayload = 1 << 20

// Reject publishes r's record, cut to fit the largest message the server
// takes.
func (rj *Rejections) Reject(ctx context.Context, r engine.Rejection) error {
	_, err := rj.js.PublishMsg(ctx, RejectionMsg(r, rj.maxPayload))
	return err
}

// RejectionMsg is the record of r in a message of at most maxPayload
// bytes: the command's payload, or its first bytes with its size and
// digest in headers, and why it was refused, in headers cut to fit.
func RejectionMsg(r engine.Rejection, maxPayload int64) *natsgo.Msg {
	m := natsgo.NewMsg(snats.RejectSubjectPrefix + r.Reason)
	m.Data = r.Payload
	if limit := int(maxPayload) - rejectHeadroom; len(m.Data) > limit {
		// The command fitted; the record, with its headers, would not.
		sum := sha256.Sum256(m.Data)
		m.Header.Set(snats.HeaderCommandBytes, strconv.Itoa(len(m.Data)))
		m.Header.Set(snats.HeaderCommandSHA256, hex.EncodeToString(sum[:]))
		m.Data = m.Data[:max(limit, 0)]
	}
	m.Header.Set(snats.HeaderRejectReason, r.Reason)
	m.Header.Set(snats.HeaderRejectError, truncate(r.Error, 1024))
	if len(r.Fields) > 0 {
		fields, omitted := fieldsHeader(r.Fields, 2048)
		m.Header.Set(snats.HeaderRejectFields, fields)
		if omitted > 0 {
			m.Header.Set(snats.HeaderRejectFieldsOmitted, strconv.Itoa(omitted))
		}
	}
	m.Header.Set(snats.HeaderCommandSubject, r.Subject)
	m.Header.Set(snats.HeaderCommandSeq, strconv.FormatUint(r.Seq, 10))
	// One record per command, however often it is refused.
	m.Header.Set(natsgo.MsgIdHdr, "rejected-"+strconv.FormatUint(r.Seq, 10))
	return m
}

// fieldsHeader is the JSON array of a rejection's field errors in at most
// limit bytes: whole fields, as many as fit (each message cut to 256
// bytes), and how many were left out. It is always valid JSON.
func fieldsHeader(fields []aggregate.FieldError, limit int) (string, int) {
	out := "[]"
	for i := range fields {
		kept := make([]aggregate.FieldError, i+1)
		copy(kept, fields[:i+1])
		for j := range kept {
			kept[j].Field, kept[j].Message = truncate(kept[j].Field, 64), truncate(kept[j].Message, 256)
		}
		b, err := json.Marshal(kept)
		if err != nil || len(b) > limit {
			return out, len(fields) - i
		}
		out = string(b)
	}
	return out, 0
}

// rejectHeadroom is what a rejection record keeps free of its command's
// bytes for its headers (the error and the fields are truncated to fit).
const rejectHeadroom = 8 << 10

// truncate makes s fit a header value: one line, at most n bytes.
func truncate(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
