package serper

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// requireNoToken fails when token shows up in any rendering of v: every
// fmt verb and JSON. v is a Result, an error, a Config or a Client.
func requireNoToken(t *testing.T, token string, vs ...any) {
	t.Helper()
	for _, v := range vs {
		for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%d"} {
			if s := fmt.Sprintf(verb, v); strings.Contains(s, token) {
				t.Fatalf("token leaked through %s: %s", verb, s)
			}
		}
		if err, ok := v.(error); ok && err != nil && strings.Contains(err.Error(), token) {
			t.Fatalf("token leaked through Error(): %s", err)
		}
		if b, err := json.Marshal(v); err == nil && strings.Contains(string(b), token) {
			t.Fatalf("token leaked through JSON: %s", b)
		}
	}
}
