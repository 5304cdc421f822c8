package serper

import (
	"strings"
	"testing"
)

// TestValidateNeverQuotesTheToken: Validate's doc says "No
// message contains the token". A base URL that carries it (as the user of
// https://TOKEN@host, in a query, as some APIs take it, or in a fragment)
// is refused, and neither the refusal nor the printed config quotes it.
func TestValidateNeverQuotesTheToken(t *testing.T) {
	const tok = "tok_abcdefgh12345"
	for _, base := range []string{
		"https://" + tok + "@api.serper.live",
		"https://" + tok + ":@api.serper.live",
		"https://api.serper.live/?api_key=" + tok,
		"https://api.serper.live/#" + tok,
	} {
		err := Config{BaseURL: base, Token: tok}.Validate()
		if err == nil {
			t.Fatalf("%s: accepted", base)
		}
		if strings.Contains(err.Error(), tok) {
			t.Errorf("the error quotes the token: %v", err)
		}
		if _, err := New(Config{BaseURL: base, Token: tok}); err != nil && strings.Contains(err.Error(), tok) {
			t.Errorf("New's error quotes the token: %v", err)
		}
		if s := (Config{BaseURL: base, Token: tok}).String(); strings.Contains(s, tok) {
			t.Errorf("String quotes the token: %s", s)
		}
	}
}
