package projections

import "github.com/serpent-engine/serpent/internal/jsonraw"

// One-pass reading of whole JSON values, checked as json.Valid checks
// them: the raw results of ObservationStored, and the data of an event
// whose type comes after it.

// value moves past one JSON value, checking it as json.Valid does, in one
// pass (jsonraw.Skip; values nested deeper than jsonraw.MaxDepth are
// refused, and go to events.Decode).
func (s *scan) value() bool {
	end, ok := jsonraw.Skip(s.b, s.i)
	if ok {
		s.i = end
	}
	return ok
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
