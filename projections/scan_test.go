package projections

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzValueMatchesValid: the one-pass value reader accepts exactly what
// json.Valid accepts (short of nesting deeper than maxDepth).
func FuzzValueMatchesValid(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":[1,2.5e-3,{"b":null}],"c":"\u00e9\n\"x\""}`, `-0`, `01`, `1.`, `1e`, `"\x"`,
		`[1,]`, `{"a"}`, `{"a":1,}`, ` true `, `nul`, `"` + "\x01" + `"`, `[[[[]]]]`, `{"a":"\ud83d"}`, `"\u12G4"`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := &scan{b: b}
		got := s.value() && s.end()
		want := json.Valid(b)
		if !got && want && bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) >= maxDepth {
			return
		}
		require.Equal(t, want, got, "%q", b)
	})
}
