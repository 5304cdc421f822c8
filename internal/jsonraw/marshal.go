package jsonraw

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

// AppendMember adds the member "name": raw at the end of obj, a JSON object
// as json.Marshal writes it, with raw written as json.Marshal writes a
// json.RawMessage: the object json.Marshal would write had it one more
// field. name is written as it is, so it must need no escaping. It
// reports false, with obj unchanged, when obj does not end an object or
// AppendMarshalled refuses raw. obj's bytes may be reused.
func AppendMember(obj []byte, name string, raw []byte) ([]byte, bool) {
	if len(obj) < 2 || obj[len(obj)-1] != '}' {
		return obj, false
	}
	out := obj[:len(obj)-1]
	if len(out) > 1 {
		out = append(out, ',')
	}
	out = append(append(append(out, '"'), name...), `":`...)
	out, ok := AppendMarshalled(out, raw)
	if !ok {
		// obj's closing brace may have been written over: put it back.
		return append(obj[:len(obj)-1], '}'), false
	}
	return append(out, '}'), true
}
