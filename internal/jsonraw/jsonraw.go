// Package jsonraw reads and writes raw JSON values in one tight pass each,
// with the results encoding/json would give: Skip checks a value as
// json.Valid does, AppendMarshalled and AppendMember write the bytes
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

// Skip checks the JSON value that starts at b[i] (after white space) as
// json.Valid checks a whole input, and returns the index just past it.
// Only the value is read: what follows it is the caller's.
func Skip(b []byte, i int) (int, bool) {
	end, _, ok := skip(b, i)
	return end, ok
}

// skip is Skip that also reports whether the value holds white space
// outside its strings or a byte json.Marshal escapes.
func skip(b []byte, i int) (end int, rewrite, ok bool) {
	var stack []byte // the open containers, '{' or '['
	ws := func() {
		for i < len(b) {
			switch b[i] {
			case ' ', '\t', '\n', '\r':
				i++
				rewrite = true
			default:
				return
			}
		}
	}
	str := func() bool {
		ws()
		if i >= len(b) || b[i] != '"' {
			return false
		}
		for j := i + 1; j < len(b); j++ {
			switch inString[b[j]] {
			case plain:
				continue
			case html:
				rewrite = true
				continue
			}
			switch c := b[j]; {
			case c == '"':
				i = j + 1
				return true
			case c < 0x20:
				return false
			case c == '\\':
				j++
				if j >= len(b) {
					return false
				}
				switch b[j] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				case 'u':
					if j+4 >= len(b) {
						return false
					}
					for _, h := range b[j+1 : j+5] {
						if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
							return false
						}
					}
					j += 4
				default:
					return false
				}
			}
		}
		return false
	}
	lit := func(c byte) bool {
		ws()
		if i < len(b) && b[i] == c {
			i++
			return true
		}
		return false
	}
	for {
		// A value is due.
		ws()
		if i >= len(b) {
			return i, rewrite, false
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) >= MaxDepth {
				return i, rewrite, false
			}
			i++
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			if lit(closer) {
				break // empty
			}
			stack = append(stack, c)
			if c == '{' && !(str() && lit(':')) {
				return i, rewrite, false
			}
			continue
		case c == '"':
			if !str() {
				return i, rewrite, false
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = number(b, i); i < 0 {
				return 0, rewrite, false
			}
		case hasPrefix(b[i:], "true"):
			i += 4
		case hasPrefix(b[i:], "false"):
			i += 5
		case hasPrefix(b[i:], "null"):
			i += 4
		default:
			return i, rewrite, false
		}
		// A value ended: close what it ends, or go on to the next.
		for next := false; !next; {
			if len(stack) == 0 {
				return i, rewrite, true
			}
			ws()
			if i >= len(b) {
				return i, rewrite, false
			}
			top, c := stack[len(stack)-1], b[i]
			switch {
			case c == ',':
				i++
				if top == '{' && !(str() && lit(':')) {
					return i, rewrite, false
				}
				next = true
			case top == '{' && c == '}' || top == '[' && c == ']':
				i++
				stack = stack[:len(stack)-1]
			default:
				return i, rewrite, false
			}
		}
	}
}

// number returns the index past the number in JSON's grammar at b[i], or
// -1 if there is none.
func number(b []byte, i int) int {
	digits := func() int {
		n := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			n++
		}
		return n
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return -1
		}
	}
	return i
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

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

// Cursor reads JSON from B at I, for readers of a known shape that leave
// anything unexpected to encoding/json.
type Cursor struct {
	B []byte
	I int
}

// Space moves past white space.
func (c *Cursor) Space() {
	for c.I < len(c.B) {
		switch c.B[c.I] {
		case ' ', '\t', '\n', '\r':
			c.I++
		default:
			return
		}
	}
}

// Lit moves past white space and then ch, if ch is next.
func (c *Cursor) Lit(ch byte) bool {
	c.Space()
	if c.I < len(c.B) && c.B[c.I] == ch {
		c.I++
		return true
	}
	return false
}

// Peek is the next byte after white space, 0 at the end.
func (c *Cursor) Peek() byte {
	c.Space()
	if c.I < len(c.B) {
		return c.B[c.I]
	}
	return 0
}

// Value moves past one valid JSON value (Skip), and reports false, not
// moving, if there is none.
func (c *Cursor) Value() bool {
	end, ok := Skip(c.B, c.I)
	if ok {
		c.I = end
	}
	return ok
}

// Done reports whether only white space is left.
func (c *Cursor) Done() bool {
	c.Space()
	return c.I == len(c.B)
}
