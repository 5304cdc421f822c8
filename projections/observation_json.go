package projections

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/serpent-engine/serpent/internal/jsonraw"
)

// encodeValue is json.Marshal(v), byte for byte. An observation's result,
// a few kilobytes of the API's JSON, is written by jsonraw in one pass
// instead of being scanned and compacted again by encoding/json.
func encodeValue(v value) ([]byte, error) {
	if o, ok := v.(*Observation); ok {
		if b, ok := o.marshal(); ok {
			return b, nil
		}
	}
	return json.Marshal(v)
}

// observationHead is Observation up to its result, in the same order and
// with the same names; seq follows the result.
type observationHead struct {
	JobID     string    `json:"job_id"`
	Key       string    `json:"key"`
	RequestID string    `json:"request_id"`
	Replayed  bool      `json:"replayed"`
	Pages     int       `json:"pages"`
	StoredAt  time.Time `json:"stored_at"`
	Version   uint64    `json:"version"`
}

// marshal writes o as json.Marshal does; false leaves it to json.Marshal
// (a result that is not one valid JSON value, or nests too deep).
func (o *Observation) marshal() ([]byte, bool) {
	head, err := json.Marshal(observationHead{JobID: o.JobID, Key: o.Key, RequestID: o.RequestID, Replayed: o.Replayed,
		Pages: o.Pages, StoredAt: o.StoredAt, Version: o.Version})
	if err != nil {
		return nil, false
	}
	out, ok := jsonraw.AppendMember(head, "result", o.Result)
	if !ok {
		return nil, false
	}
	out = append(out[:len(out)-1], `,"seq":`...)
	out = strconv.AppendUint(out, o.Seq, 10)
	return append(out, '}'), true
}
