// Package jsonraw reads and writes raw JSON values in one tight pass each,
// with the results encoding/json would give: Skip checks a value as
// json.Valid does, AppendMarshalled and MarshalWith write the bytes
// json.Marshal writes for a json.RawMessage (compacted, with <, >, &,
// U+2028 and U+2029 escaped), and Cursor carries readers of a known shape
// through white space, literals and whole values. encoding/json runs its
// byte-at-a-time scanner over every raw message it marshals or decodes,
// which for a search result of a few kilobytes, read from the API,
// stored in an event and again in a projection value, is a measurable
// share of a job's CPU.
//
// Everything here says no rather than guess: on input it does not accept
// (invalid, or nested deeper than MaxDepth) the caller hands the value to
// encoding/json, which gives the same answer it always did. Like
// encoding/json, nothing here checks the UTF-8 of a raw value's strings:
// their bytes are copied as they are. The package is pure; events,
// projections, serper and worker use it.
package jsonraw

// MaxDepth bounds the nesting Skip and AppendMarshalled accept; deeper
// values are refused, for the caller to hand to encoding/json (which
// allows 10,000 levels).
const MaxDepth = 1000

// inString classifies the bytes of a JSON string: plain for bytes copied as
// they are, special for the quote, the backslash and control characters,
// html for the bytes json.Marshal escapes (<, > and &, and the first byte
// of U+2028 and U+2029).
var inString = func() (t [256]byte) {
	for c := range t {
		switch {
		case c == '"' || c == '\\' || c < 0x20:
			t[c] = special
		case c == '<' || c == '>' || c == '&' || c == 0xE2:
			t[c] = html
		}
	}
	return t
}()

const (
	plain   = 0
	special = 1
	html    = 2
)
