package projections

// One-pass reading of whole JSON values, checked as json.Valid checks
// them: the raw results of ObservationStored, and the data of an event
// whose type comes after it.

// maxDepth bounds nesting in value; deeper values go to events.Decode
// (encoding/json allows 10,000 levels).
const maxDepth = 1000

// value moves past one JSON value, checking it as json.Valid does, in one
// pass.
func (s *scan) value() bool {
	var stack []byte // the open containers, '{' or '['
	for {
		// A value is due.
		s.ws()
		if s.i >= len(s.b) {
			return false
		}
		switch c := s.b[s.i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return false
			}
			s.i++
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			if s.lit(closer) {
				break // empty
			}
			stack = append(stack, c)
			if c == '{' && !(s.jsonString() && s.lit(':')) {
				return false
			}
			continue
		case c == '"':
			if !s.jsonString() {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if !s.number() {
				return false
			}
		case hasPrefix(s.b[s.i:], "true"):
			s.i += 4
		case hasPrefix(s.b[s.i:], "false"):
			s.i += 5
		case hasPrefix(s.b[s.i:], "null"):
			s.i += 4
		default:
			return false
		}
		// A value ended: close what it ends, or go on to the next.
		for next := false; !next; {
			if len(stack) == 0 {
				return true
			}
			s.ws()
			if s.i >= len(s.b) {
				return false
			}
			top, c := stack[len(stack)-1], s.b[s.i]
			switch {
			case c == ',':
				s.i++
				if top == '{' && !(s.jsonString() && s.lit(':')) {
					return false
				}
				next = true
			case top == '{' && c == '}' || top == '[' && c == ']':
				s.i++
				stack = stack[:len(stack)-1]
			default:
				return false
			}
		}
	}
}

// jsonString moves past one string, checking its escapes.
func (s *scan) jsonString() bool {
	s.ws()
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	for j := s.i + 1; j < len(s.b); j++ {
		if inString[s.b[j]] != special {
			continue
		}
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(s.b) {
				return false
			}
			switch s.b[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(s.b) {
					return false
				}
				for _, h := range s.b[j+1 : j+5] {
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

// number moves past one number in JSON's grammar.
func (s *scan) number() bool {
	digits := func() int {
		n := 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case digits() == 0:
		return false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// skip moves past one value; json.Valid checks it afterwards.
func (s *scan) skip() bool {
	depth := 0
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch c {
		case '"':
			s.i++
			for s.i < len(s.b) && s.b[s.i] != '"' {
				if s.b[s.i] == '\\' {
					s.i++
				}
				s.i++
			}
			if s.i >= len(s.b) {
				return false
			}
			s.i++
		case '{', '[':
			depth++
			s.i++
		case '}', ']':
			if depth == 0 {
				return true
			}
			depth--
			s.i++
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return true
			}
			s.i++
		default:
			s.i++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return true
		}
	}
	return true
}
