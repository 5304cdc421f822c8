package serper

import (
	"bytes"
	"encoding/json"
	"strings"
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
	doc = bytes.ReplaceAll(doc, []byte(r.secret), []byte(redacted))
	if !bytes.Contains(doc, []byte(`\`)) {
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
