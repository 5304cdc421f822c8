package events

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/serpent-engine/serpent/internal/jsonraw"
)

// scan is a single-pass reader for the JSON subset the log is written in.
// Every method returns false on input it is not certain to read exactly as
// encoding/json would (escapes it does not handle, null, duplicate or
// unknown members, numbers that are not plain integers); the caller then
// hands the whole event to decodeJSON.
type scan struct {
	jsonraw.Cursor
	// light drops results after checking them (DecodeLight).
	light bool
}

// object reads an object, calling member for each key with the scanner at
// the member's value.
func (s *scan) object(member func(key []byte) bool) bool {
	if !s.Lit('{') {
		return false
	}
	if s.Lit('}') {
		return true
	}
	for {
		k, ok := s.plainString()
		if !ok || !s.Lit(':') || !member(k) {
			return false
		}
		if s.Lit(',') {
			continue
		}
		return s.Lit('}')
	}
}

// array reads an array, calling elem with the scanner at each element.
// An empty array is reported by empty.
func (s *scan) array(elem func() bool) (empty, ok bool) {
	if !s.Lit('[') {
		return false, false
	}
	if s.Lit(']') {
		return true, true
	}
	for {
		if !elem() {
			return false, false
		}
		if s.Lit(',') {
			continue
		}
		return false, s.Lit(']')
	}
}

// inString classifies the bytes of a JSON string: 0 for plain ASCII,
// special for the quote, the backslash and control characters, high for
// bytes of multi-byte UTF-8.
var inString = func() (t [256]byte) {
	for c := range t {
		switch {
		case c == '"' || c == '\\' || c < 0x20:
			t[c] = special
		case c >= utf8.RuneSelf:
			t[c] = high
		}
	}
	return t
}()

const (
	special = 1
	high    = 2
)

// plainString reads a string without escapes, in valid UTF-8, as bytes of
// the input (object keys, which must match exactly anyway).
func (s *scan) plainString() ([]byte, bool) {
	s.Space()
	if s.I >= len(s.B) || s.B[s.I] != '"' {
		return nil, false
	}
	start, ascii := s.I+1, true
	for j := start; j < len(s.B); j++ {
		switch inString[s.B[j]] {
		case 0:
			continue
		case high:
			ascii = false
			continue
		}
		if s.B[j] != '"' {
			return nil, false
		}
		v := s.B[start:j]
		if !ascii && !utf8.Valid(v) {
			return nil, false
		}
		s.I = j + 1
		return v, true
	}
	return nil, false
}

// str reads a string into *v, unescaping the escapes JSON has except
// surrogate pairs.
func (s *scan) str(v *string) bool {
	if b, ok := s.plainString(); ok {
		*v = string(b)
		return true
	}
	if s.I >= len(s.B) || s.B[s.I] != '"' {
		return false
	}
	out := make([]byte, 0, 64)
	for j := s.I + 1; j < len(s.B); j++ {
		c := s.B[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return false
			}
			*v, s.I = string(out), j+1
			return true
		case c < 0x20:
			return false
		case c != '\\':
			out = append(out, c)
			continue
		}
		if j+1 >= len(s.B) {
			return false
		}
		j++
		switch s.B[j] {
		case '"', '\\', '/':
			out = append(out, s.B[j])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if j+4 >= len(s.B) {
				return false
			}
			r, err := strconv.ParseUint(string(s.B[j+1:j+5]), 16, 32)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return false
			}
			out = utf8.AppendRune(out, rune(r))
			j += 4
		default:
			return false
		}
	}
	return false
}

// integer reads a plain JSON integer literal of at most bits bits.
func (s *scan) integer(signed bool, bits int) (int64, uint64, bool) {
	s.Space()
	start := s.I
	if signed && s.I < len(s.B) && s.B[s.I] == '-' {
		s.I++
	}
	digits := s.I
	for s.I < len(s.B) && s.B[s.I] >= '0' && s.B[s.I] <= '9' {
		s.I++
	}
	switch {
	case s.I == digits, s.B[digits] == '0' && s.I-digits > 1:
		return 0, 0, false
	case s.I < len(s.B) && (s.B[s.I] == '.' || s.B[s.I] == 'e' || s.B[s.I] == 'E'):
		return 0, 0, false
	}
	lit := string(s.B[start:s.I])
	if signed {
		n, err := strconv.ParseInt(lit, 10, bits)
		return n, 0, err == nil
	}
	n, err := strconv.ParseUint(lit, 10, bits)
	return 0, n, err == nil
}

func (s *scan) int(v *int) bool {
	n, _, ok := s.integer(true, strconv.IntSize)
	*v = int(n)
	return ok
}

func (s *scan) int64(v *int64) bool {
	n, _, ok := s.integer(true, 64)
	*v = n
	return ok
}

func (s *scan) uint64(v *uint64) bool {
	_, n, ok := s.integer(false, 64)
	*v = n
	return ok
}

func (s *scan) bool(v *bool) bool {
	s.Space()
	switch {
	case hasPrefix(s.B[s.I:], "true"):
		*v, s.I = true, s.I+4
	case hasPrefix(s.B[s.I:], "false"):
		*v, s.I = false, s.I+5
	default:
		return false
	}
	return true
}

// time reads a time as time.Time.UnmarshalJSON does, from the literal.
func (s *scan) time(v *time.Time) bool {
	s.Space()
	start := s.I
	if _, ok := s.plainString(); !ok {
		return false
	}
	return v.UnmarshalJSON(s.B[start:s.I]) == nil
}

// duration reads an Duration as its UnmarshalText does.
func (s *scan) duration(v *Duration) bool {
	b, ok := s.plainString()
	return ok && v.UnmarshalText(b) == nil
}

// strings reads an array of strings; [] gives an empty, non-nil slice as
// encoding/json does.
func (s *scan) strings(v *[]string) bool {
	out := []string{}
	_, ok := s.array(func() bool {
		var x string
		if !s.str(&x) {
			return false
		}
		out = append(out, x)
		return true
	})
	*v = out
	return ok
}

// raw reads any JSON value except null and keeps a copy of its bytes, as
// json.RawMessage does; with s.light it checks the value and keeps
// nothing.
func (s *scan) raw(v *json.RawMessage) bool {
	s.Space()
	start := s.I
	if s.I < len(s.B) && s.B[s.I] == 'n' || !s.Value() {
		return false
	}
	if !s.light {
		*v = append(json.RawMessage(nil), s.B[start:s.I]...)
	}
	return true
}

// once marks member i as read, refusing a second one: encoding/json keeps
// the last of duplicate members, which decodeJSON will do instead.
type once uint32

func (o *once) first(i int) bool {
	if *o&(1<<i) != 0 {
		return false
	}
	*o |= 1 << i
	return true
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }
