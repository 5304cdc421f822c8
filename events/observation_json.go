package events

import (
	"encoding/json"

	"github.com/serpent-engine/serpent/internal/jsonraw"
)

// marshalData is json.Marshal(p), byte for byte. An observation's result,
// a few kilobytes of the API's JSON, is written by jsonraw in one pass
// instead of being scanned and compacted again by encoding/json.
func marshalData(p Payload) ([]byte, error) {
	if d, ok := p.(ObservationStored); ok {
		if b, ok := d.marshal(); ok {
			return b, nil
		}
	}
	return json.Marshal(p)
}

// observationHead is ObservationStored without its result, which is its
// last field, in the same order and with the same names.
type observationHead struct {
	Key       string `json:"key"`
	RequestID string `json:"request_id"`
	Replayed  bool   `json:"replayed"`
	Pages     int    `json:"pages"`
}

// marshal writes d as json.Marshal does; false leaves it to json.Marshal
// (a result that is not one valid JSON value, or nests too deep).
func (d ObservationStored) marshal() ([]byte, bool) {
	head, err := json.Marshal(observationHead{Key: d.Key, RequestID: d.RequestID, Replayed: d.Replayed, Pages: d.Pages})
	if err != nil {
		return nil, false
	}
	return jsonraw.AppendMember(head, "result", d.Result)
}
