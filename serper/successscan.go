package serper

import (
	"strconv"
	"strings"

	"github.com/serpent-engine/serpent/internal/jsonraw"
)

// successFields are the members of a success body the client reads, in
// the order of successWire.
var successFields = [...]string{"requestId", "organic", "pages"}

// scanSuccess reads a success body in one pass, for the body json.Unmarshal
// into successWire reads without a doubt: a JSON object (white space
// around it allowed) whose keys are printable ASCII without escapes, with
// requestId, organic and pages each at most once and spelled exactly as
// the API spells them (encoding/json would also take another case), a
// requestId in printable ASCII without escapes, an organic array of
// objects and a plain integer page count. Whatever it does not take
// (null among them, and every invalid body) it leaves to json.Unmarshal,
// which decides, and words the error, as it always did: false says
// nothing about the body but that.
func scanSuccess(body []byte) (successWire, bool) {
	var w successWire
	c := &jsonraw.Cursor{B: body}
	if !c.Lit('{') {
		return w, false
	}
	if c.Lit('}') {
		return w, c.Done()
	}
	for {
		key, ok := asciiString(c)
		if !ok || !c.Lit(':') {
			return w, false
		}
		field := -1
		for f, name := range successFields {
			if key == name {
				field = f
			} else if strings.EqualFold(key, name) {
				return w, false
			}
		}
		switch field {
		case 0:
			id, ok := asciiString(c)
			if !ok || w.RequestID != nil {
				return w, false
			}
			w.RequestID = &id
		case 1:
			if w.Organic != nil || !objects(c) {
				return w, false
			}
			w.Organic = &[]organicObject{}
		case 2:
			c.Space()
			start := c.I
			if !c.Value() || w.Pages != nil {
				return w, false
			}
			n, ok := plainInt(body[start:c.I])
			if !ok {
				return w, false
			}
			w.Pages = &n
		default:
			if !c.Value() {
				return w, false
			}
		}
		if c.Lit('}') {
			return w, c.Done()
		}
		if !c.Lit(',') {
			return w, false
		}
	}
}

// asciiString reads a string of printable ASCII without escapes.
func asciiString(c *jsonraw.Cursor) (string, bool) {
	if !c.Lit('"') {
		return "", false
	}
	start := c.I
	for ; c.I < len(c.B) && c.B[c.I] != '"'; c.I++ {
		if b := c.B[c.I]; b < 0x20 || b > 0x7e || b == '\\' {
			return "", false
		}
	}
	if c.I >= len(c.B) {
		return "", false
	}
	c.I++
	return string(c.B[start : c.I-1]), true
}

// objects moves past an array of objects.
func objects(c *jsonraw.Cursor) bool {
	if !c.Lit('[') {
		return false
	}
	if c.Lit(']') {
		return true
	}
	for {
		if c.Peek() != '{' || !c.Value() {
			return false
		}
		if c.Lit(']') {
			return true
		}
		if !c.Lit(',') {
			return false
		}
	}
}

// plainInt reads an integer literal as encoding/json reads one into an
// int: no fraction, no exponent, in range.
func plainInt(lit []byte) (int, bool) {
	for k, c := range lit {
		if !(c >= '0' && c <= '9' || c == '-' && k == 0) {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(string(lit), 10, 0)
	return int(n), err == nil
}
