package projections

// Whole JSON values are checked as json.Valid checks them by the embedded
// jsonraw.Cursor's Value (the raw results of ObservationStored, and the
// data of an event whose type comes after it); skip only finds where a
// value ends.

// skip moves past one value; json.Valid checks it afterwards.
func (s *scan) skip() bool {
	depth := 0
	for s.I < len(s.B) {
		c := s.B[s.I]
		switch c {
		case '"':
			s.I++
			for s.I < len(s.B) && s.B[s.I] != '"' {
				if s.B[s.I] == '\\' {
					s.I++
				}
				s.I++
			}
			if s.I >= len(s.B) {
				return false
			}
			s.I++
		case '{', '[':
			depth++
			s.I++
		case '}', ']':
			if depth == 0 {
				return true
			}
			depth--
			s.I++
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return true
			}
			s.I++
		default:
			s.I++
		}
		if depth == 0 && (c == '"' || c == '}' || c == ']') {
			return true
		}
	}
	return true
}
