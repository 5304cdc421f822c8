package projections

import (
	"encoding/json"

	"github.com/serpent-engine/serpent/internal/jsonraw"
)

// encodeValue is json.Marshal(v), byte for byte. An observation's result,
// a few kilobytes of the API's JSON, is written by jsonraw in one pass
// instead of being scanned and compacted again by encoding/json.
func encodeValue(v value) ([]byte, error) {
	if o, ok := v.(*Observation); ok {
		head := *o
		head.Result = nil
		if b, ok := jsonraw.MarshalWith(head, "result", o.Result); ok {
			return b, nil
		}
	}
	return json.Marshal(v)
}
