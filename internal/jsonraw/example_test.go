package jsonraw_test

import (
	"fmt"

	"github.com/serpent-engine/serpent/internal/jsonraw"
)

// A raw value is written as json.Marshal writes a json.RawMessage:
// compacted, with the bytes it escapes for HTML escaped.
func ExampleAppendMarshalled() {
	out, ok := jsonraw.AppendMarshalled([]byte("result="), []byte(`{ "title": "Tom & Jerry" }`))
	fmt.Println(string(out), ok)
	_, ok = jsonraw.AppendMarshalled(nil, []byte(`{"title":`))
	fmt.Println(ok)
	// Output:
	// result={"title":"Tom \u0026 Jerry"} true
	// false
}

// A Cursor reads a known shape and leaves the rest to encoding/json.
func ExampleCursor() {
	c := &jsonraw.Cursor{B: []byte(` [ {"a":1} , "x" ] `)}
	fmt.Println(c.Lit('['), c.Value(), c.Lit(','), c.Value(), c.Lit(']'), c.Done())
	// Output: true true true true true true
}
