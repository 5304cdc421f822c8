package jsonraw

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
