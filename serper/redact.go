package serper

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// redacted stands in for the token wherever it would otherwise be printed.
const redacted = "[redacted]"

// redactor scrubs one secret out of everything the client builds from a
// reply or an error. A server that echoes the Authorization header, a proxy
// that quotes the request in its error page, an error from the transport:
// none of them may carry the token into a Result, a log line or an event.
type redactor struct{ secret string }

func (r redactor) text(s string) string {
	if r.secret == "" || !strings.Contains(s, r.secret) {
		return s
	}
	return strings.ReplaceAll(s, r.secret, redacted)
}

func (r redactor) texts(ss []string) []string {
	for i, s := range ss {
		ss[i] = r.text(s)
	}
	return ss
}

// err wraps err so that its message is scrubbed. Unwrap still reaches the
// original so errors.Is(err, context.Canceled) keeps working; the errors
// the transport returns do not carry the token, the wrapper is the belt to
// those braces.
func (r redactor) err(err error) error {
	if err == nil {
		return nil
	}
	return &scrubbedError{msg: r.text(err.Error()), err: err}
}

// json scrubs the secret out of a valid JSON document, also where it hides
// behind escapes ("\u0073k_..."): in that rare case the document is decoded,
// scrubbed and encoded again, which sorts object keys.
func (r redactor) json(doc []byte) []byte {
	if r.secret == "" {
		return doc
	}
	if bytes.Contains(doc, []byte(r.secret)) { // ReplaceAll copies even when nothing matches
		doc = bytes.ReplaceAll(doc, []byte(r.secret), []byte(redacted))
	}
	if !r.mayHide(doc) {
		return doc
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return doc
	}
	v, changed := r.walk(v)
	if !changed {
		return doc
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return []byte(`null`)
	}
	return bytes.TrimSpace(out.Bytes())
}

// mayHide reports whether an escape in doc could spell a character of the
// secret: one that stands for a character the secret holds. Real replies
// are full of escaped quotes and ampersands; decoding each of them again
// would cost more than the rest of reading the reply.
func (r redactor) mayHide(doc []byte) bool {
	for i := 0; i < len(doc)-1; i++ {
		if doc[i] != '\\' {
			continue
		}
		c := doc[i+1]
		if c != 'u' {
			if ch, ok := shortEscapes[c]; !ok || strings.IndexByte(r.secret, ch) >= 0 {
				return true
			}
			i++ // the escaped character starts no escape of its own
			continue
		}
		ch, ok := hex4(doc[i+2:])
		if !ok || ch >= utf8.RuneSelf && !isASCII(r.secret) || ch < utf8.RuneSelf && strings.IndexByte(r.secret, byte(ch)) >= 0 {
			return true
		}
		i += 5
	}
	return false
}

// shortEscapes maps JSON's two-character escapes to the byte they stand for.
var shortEscapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var v rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func (r redactor) walk(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		s := r.text(x)
		return s, s != x
	case []any:
		changed := false
		for i := range x {
			var c bool
			x[i], c = r.walk(x[i])
			changed = changed || c
		}
		return x, changed
	case map[string]any:
		changed := false
		out := make(map[string]any, len(x))
		for k, e := range x {
			e, c := r.walk(e)
			k2 := r.text(k)
			changed = changed || c || k2 != k
			out[k2] = e
		}
		return out, changed
	}
	return v, false
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
