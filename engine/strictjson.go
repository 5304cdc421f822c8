package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/serpent-engine/serpent/internal/jsonraw"
)

// decodeStrict reads one JSON object of the given shape into v, as
// strictly as commands are read: a field the shape does not have, data
// after the object, and a field named twice or in another case (which
// value was meant?) are errors.
func decodeStrict(data []byte, v any, shape *jsonShape) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && len(bytes.TrimSpace(data[dec.InputOffset():])) > 0 {
		err = errors.New("data after the JSON object")
	}
	if err == nil {
		err = shape.check(data)
	}
	return err
}

// jsonShape is the fields of a JSON object as a struct declares them, and
// the shapes of the fields that are objects themselves.
type jsonShape struct {
	keys   []string
	nested map[string]*jsonShape
}

// shapeOf reads the JSON field names of a struct type, and of its struct
// fields (time.Time, a string in JSON, aside).
func shapeOf(t reflect.Type) *jsonShape {
	s := &jsonShape{nested: map[string]*jsonShape{}}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		s.keys = append(s.keys, name)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() {
			s.nested[name] = shapeOf(ft)
		}
	}
	return s
}

// check refuses what encoding/json lets through in an object of this
// shape, at any depth: a field named twice (the last would win) or in
// another case ("Query" would be read as query). Either way the
// publisher's meaning is unclear, and a guess may buy a search. Anything
// that is not an object is left to the decoder, which has said what is
// wrong with it.
//
// It refuses, too, an escaped half of a UTF-16 surrogate pair alone
// ("\ud800"), which is no character: the decoder reads it as U+FFFD, so
// two different texts would become one, a text nobody sent.
func (s *jsonShape) check(data []byte) error {
	if loneSurrogate(data) {
		return errors.New(`escapes half a UTF-16 surrogate pair alone (\uD800 to \uDFFF), which is no character`)
	}
	if s.plain(data) {
		return nil
	}
	return s.checkAt(data, "")
}

// loneSurrogate reports whether JSON text escapes a UTF-16 surrogate that
// is not half of a pair (\uD83D\uDE00 is one character, \uD800 alone
// none). Backslashes appear only in strings, so the text is scanned as a
// whole.
func loneSurrogate(data []byte) bool {
	if bytes.IndexByte(data, '\\') < 0 {
		return false
	}
	high := false // the last escape was a high surrogate, its low half due
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			if high {
				return true
			}
			continue
		}
		if i+5 >= len(data) || data[i+1] != 'u' {
			if high {
				return true
			}
			i++ // the escaped character, a backslash included
			continue
		}
		v, err := strconv.ParseUint(string(data[i+2:i+6]), 16, 16)
		if err != nil {
			return false // the decoder says what is wrong
		}
		i += 5
		switch {
		case v >= 0xD800 && v < 0xDC00:
			if high {
				return true
			}
			high = true
		case v >= 0xDC00 && v < 0xE000:
			if !high {
				return true
			}
			high = false
		case high:
			return true
		}
	}
	return high
}

// plain reports, in one pass, that data begins with an object checkAt
// has nothing to say about: every key once, written without escapes, one
// of the shape's, and nested objects alike. false means only that checkAt
// must look (and say what is wrong, if anything is).
func (s *jsonShape) plain(data []byte) bool {
	return s.plainAt(&jsonraw.Cursor{B: data})
}

func (s *jsonShape) plainAt(c *jsonraw.Cursor) bool {
	if len(s.keys) > 64 || !c.Lit('{') {
		return false
	}
	if c.Lit('}') {
		return true
	}
	var seen uint64
	for {
		if !c.Lit('"') {
			return false
		}
		end := c.I
		for end < len(c.B) && c.B[end] != '"' && c.B[end] != '\\' && c.B[end] >= 0x20 {
			end++
		}
		if end >= len(c.B) || c.B[end] != '"' {
			return false
		}
		key := c.B[c.I:end]
		k := slices.IndexFunc(s.keys, func(name string) bool { return name == string(key) })
		if k < 0 || seen&(1<<k) != 0 {
			return false
		}
		seen |= 1 << k
		if c.I = end + 1; !c.Lit(':') {
			return false
		}
		ok := false
		if n := s.nested[s.keys[k]]; n != nil && c.Peek() == '{' {
			ok = n.plainAt(c)
		} else {
			ok = c.Value()
		}
		switch {
		case !ok:
			return false
		case c.Lit('}'):
			return true
		case !c.Lit(','):
			return false
		}
	}
}

func (s *jsonShape) checkAt(data []byte, path string) error {
	d := json.NewDecoder(bytes.NewReader(data))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		switch {
		case !slices.Contains(s.keys, key):
			return fmt.Errorf("has the field %q; the fields%s are, in lower case: %s", path+key, of(path), strings.Join(s.keys, ", "))
		case seen[key]:
			return fmt.Errorf("has the field %q twice", path+key)
		}
		seen[key] = true
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return err
		}
		if n := s.nested[key]; n != nil {
			if err := n.checkAt(raw, path+key+"."); err != nil {
				return err
			}
		}
	}
	return nil
}

func of(path string) string {
	if path == "" {
		return ""
	}
	return " of " + strings.TrimSuffix(path, ".")
}
