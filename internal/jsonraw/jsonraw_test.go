package jsonraw_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/internal/jsonraw"
)

// seeds are values and near-values: escapes, bytes json.Marshal escapes,
// white space, invalid UTF-8, broken grammar.
var seeds = []string{
	`{}`, `[]`, `{"a":[1,2.5e-3,{"b":null}],"c":"\u00e9\n\"x\""}`, `-0`, `01`, `1.`, `1e`, `"\x"`,
	`[1,]`, `{"a"}`, `{"a":1,}`, ` true `, `nul`, `"` + "\x01" + `"`, `[[[[]]]]`, `{"a":"\ud83d"}`,
	`"\u12G4"`, "\"\xff\"", `{"q":"Tom & Jerry <b>"}`, "\"a\u2028b\u2029c\"", "\"\xe2\x80\"",
	"{ \"a\" : [ 1 , \"x y\" ] }\n", `"\\"`, `"\"<"`, `{"organic":[{"title":"A&B","link":"https://x.test/?a=1&b=2"}]}`,
	``, ` `, `{} {}`, `[1] x`,
}

// marshalled is what json.Marshal writes for raw inside a value.
func marshalled(raw []byte) ([]byte, error) {
	b, err := json.Marshal(struct {
		R json.RawMessage `json:"r"`
	}{raw})
	if err != nil {
		return nil, err
	}
	return b[len(`{"r":`) : len(b)-1], nil
}

func TestAppendMarshalledIsWhatMarshalWrites(t *testing.T) {
	for _, s := range seeds {
		want, err := marshalled([]byte(s))
		got, ok := jsonraw.AppendMarshalled([]byte("prefix:"), []byte(s))
		if err != nil {
			require.False(t, ok, "%q: json.Marshal refuses it (%v)", s, err)
			require.Equal(t, "prefix:", string(got), "%q: nothing appended", s)
			continue
		}
		require.True(t, ok, "%q", s)
		require.Equal(t, "prefix:"+string(want), string(got), "%q", s)
	}
}

func TestAppendMarshalledKeepsACompactValueAsItIs(t *testing.T) {
	raw := []byte(`{"organic":[{"title":"plain","position":1}],"pages":1}`)
	got, ok := jsonraw.AppendMarshalled(nil, raw)
	require.True(t, ok)
	require.Equal(t, raw, got)
}

func TestTooDeepIsLeftToEncodingJSON(t *testing.T) {
	deep := strings.Repeat("[", jsonraw.MaxDepth+1) + strings.Repeat("]", jsonraw.MaxDepth+1)
	require.True(t, json.Valid([]byte(deep)))
	_, ok := jsonraw.AppendMarshalled(nil, []byte(deep))
	require.False(t, ok)
	_, ok = jsonraw.Skip([]byte(deep), 0)
	require.False(t, ok)
}

func TestSkipStopsAfterTheValue(t *testing.T) {
	b := []byte(` {"a":[1,"]"]} ,"next":2`)
	end, ok := jsonraw.Skip(b, 0)
	require.True(t, ok)
	require.Equal(t, ` ,"next":2`, string(b[end:]))
}

// FuzzSkipMatchesValid: Skip, with nothing but white space after the
// value, accepts exactly what json.Valid accepts (short of nesting deeper
// than MaxDepth).
func FuzzSkipMatchesValid(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		end, ok := jsonraw.Skip(b, 0)
		got := ok && len(bytes.TrimLeft(b[end:], " \t\r\n")) == 0
		want := json.Valid(b)
		if !got && want && bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) >= jsonraw.MaxDepth {
			return
		}
		require.Equal(t, want, got, "%q", b)
	})
}

// FuzzAppendMarshalled: whatever AppendMarshalled writes is byte for byte
// what json.Marshal writes, and it refuses what json.Marshal refuses.
func FuzzAppendMarshalled(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, err := marshalled(b)
		got, ok := jsonraw.AppendMarshalled(nil, b)
		if err != nil {
			require.False(t, ok, "%q: json.Marshal refuses it (%v)", b, err)
			return
		}
		if !ok {
			require.GreaterOrEqual(t, bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")), jsonraw.MaxDepth, "%q", b)
			return
		}
		require.Equal(t, string(want), string(got), "%q", b)
	})
}

func TestMarshalWithIsWhatMarshalWrites(t *testing.T) {
	type last struct {
		A string          `json:"a,omitempty"`
		R json.RawMessage `json:"r"`
	}
	type middle struct {
		A string          `json:"a"`
		R json.RawMessage `json:"r"`
		N uint64          `json:"n"`
	}
	for _, a := range []string{"", "x&y", `say "r":null`} {
		for _, r := range seeds {
			for _, v := range []struct{ full, head any }{
				{last{a, json.RawMessage(r)}, last{a, nil}},
				{middle{a, json.RawMessage(r), 7}, middle{a, nil, 7}},
			} {
				want, wantErr := json.Marshal(v.full)
				got, ok := jsonraw.MarshalWith(v.head, "r", []byte(r))
				if wantErr != nil || r == "" {
					require.False(t, ok, "%q", r)
					continue
				}
				require.True(t, ok, "%q", r)
				require.Equal(t, string(want), string(got), "%q", r)
			}
		}
	}
	_, ok := jsonraw.MarshalWith(struct{ X int }{1}, "r", []byte(`1`))
	require.False(t, ok, "no such member")
	_, ok = jsonraw.MarshalWith(struct {
		R json.RawMessage `json:"r"`
	}{}, "r", nil)
	require.False(t, ok, "a nil result is json.Marshal's to write")
}
