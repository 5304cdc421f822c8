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
		raw := d.Result
		d.Result = nil
		if b, ok := jsonraw.MarshalWith(d, "result", raw); ok {
			return b, nil
		}
	}
	return json.Marshal(p)
}
