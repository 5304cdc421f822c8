package events

// DecodeJSON is Decode by encoding/json alone, the reference the tests
// hold the fast path to.
func DecodeJSON(b []byte) (Event, error) {
	var c Codec
	return c.decodeJSON(b)
}

// DecodeAllJSON is DecodeAll with DecodeJSON.
func DecodeAllJSON(b []byte) ([]Event, error) { return decodeAll(b, DecodeJSON) }

// DecodeFast is the fast path alone: ok is false where it leaves an
// event to encoding/json.
func DecodeFast(b []byte) (e Event, ok bool) { return decodeFast(b, false) }
