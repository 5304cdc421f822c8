package jsonraw

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
