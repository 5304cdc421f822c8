package jsonraw

import (
	"bytes"
	"encoding/json"
)

// AppendMarshalled appends to dst the bytes json.Marshal writes for
// json.RawMessage(raw) inside a value: raw compacted, with <, >, &, U+2028
// and U+2029 in its strings escaped as \u003c, \u003e, \u0026, \u2028 and
// \u2029. It reports false, appending nothing, when raw is not exactly one
// valid JSON value (with white space around it allowed) or nests deeper
// than MaxDepth: json.Marshal then says what is wrong, or writes it.
func AppendMarshalled(dst, raw []byte) ([]byte, bool) {
	end, rewrite, ok := skip(raw, 0)
	if !ok {
		return dst, false
	}
	for ; end < len(raw); end++ { // only white space may follow
		switch raw[end] {
		case ' ', '\t', '\n', '\r':
			rewrite = true
		default:
			return dst, false
		}
	}
	if !rewrite {
		return append(dst, raw...), true
	}
	return appendRewritten(dst, raw), true
}

// appendRewritten copies a valid value without the white space outside its
// strings, escaping what json.Marshal escapes.
func appendRewritten(dst, raw []byte) []byte {
	const hex = "0123456789abcdef"
	inStr := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if !inStr {
			switch c {
			case ' ', '\t', '\n', '\r':
				continue
			case '"':
				inStr = true
			}
			dst = append(dst, c)
			continue
		}
		switch c {
		case '"':
			inStr = false
		case '\\':
			dst = append(dst, c, raw[i+1]) // valid: an escape has a next byte
			i++
			continue
		case '<', '>', '&':
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			continue
		case 0xE2:
			if i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8 {
				dst = append(dst, '\\', 'u', '2', '0', '2', hex[raw[i+2]&0xF])
				i += 2
				continue
			}
		}
		dst = append(dst, c)
	}
	return dst
}

// MarshalWith is json.Marshal(v) for a struct whose json.RawMessage
// field named name (in JSON) holds raw: v is given with that field nil,
// encoding/json writes everything else, and raw goes in place of its
// null, written by AppendMarshalled. The last member named name in what
// json.Marshal writes must be that field, followed by nothing but the
// object's end or further members. It reports false when json.Marshal
// fails, raw is nil, or AppendMarshalled refuses raw: json.Marshal of the
// whole value then says what is wrong, or writes it.
func MarshalWith(v any, name string, raw []byte) ([]byte, bool) {
	if raw == nil {
		return nil, false
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	key := `"` + name + `":`
	i := bytes.LastIndex(b, []byte(key+"null"))
	if i < 0 {
		return nil, false
	}
	rest := b[i+len(key)+len("null"):]
	if len(rest) == 0 || rest[0] != ',' && rest[0] != '}' {
		return nil, false
	}
	out := make([]byte, 0, len(b)+len(raw))
	out = append(out, b[:i+len(key)]...)
	out, ok := AppendMarshalled(out, raw)
	if !ok {
		return nil, false
	}
	return append(out, rest...), true
}
