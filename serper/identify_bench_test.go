package serper

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// BenchmarkIdentifySuccess identifies a 200 with ten organic results, about
// the size the sandbox sends: plain, as the sandbox writes them, and with
// the escapes real snippets carry (quotes, an ampersand).
func BenchmarkIdentifySuccess(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchIdentify(b, "tested and reviewed", "what we found") })
	b.Run("escaped", func(b *testing.B) { benchIdentify(b, "tested & reviewed", `what we "found"`) })
}

func benchIdentify(b *testing.B, title, snippet string) {
	type item struct {
		Position int    `json:"position"`
		Title    string `json:"title"`
		Link     string `json:"link"`
		Snippet  string `json:"snippet"`
	}
	items := make([]item, 10)
	for i := range items {
		items[i] = item{i + 1, fmt.Sprintf("Best espresso scale %d: %s", i, title),
			fmt.Sprintf("https://example%d.com/espresso-scale/%d", i, 1000+i),
			"We weighed every shot on twelve scales. Here is " + snippet + " about espresso scale in US."}
	}
	body, err := json.Marshal(map[string]any{"requestId": "req_0123456789abcdef", "organic": items, "pages": 1,
		"search": map[string]any{"q": "espresso scale", "gl": "us", "hl": "en", "num": 10}, "searchedAt": "2026-12-02T14:00:00Z"})
	if err != nil {
		b.Fatal(err)
	}
	rp := reply{status: http.StatusOK, header: http.Header{}, body: body}
	now := time.Now()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if res := identify(rp, now, redactor{secret: "tok_secret"}); !res.Confirmed {
			b.Fatal(res.Detail)
		}
	}
}
