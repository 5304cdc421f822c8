package sandbox

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ZeroResultsPrefix marks queries that always have zero results, so a demo
// or test can ask for a free, empty search without the ZeroResults fault.
const ZeroResultsPrefix = "zero-results:"

// resultsPerPage is how many organic results fill one billed page.
const resultsPerPage = 10

type organicResult struct {
	Position int    `json:"position"`
	Title    string `json:"title"`
	Link     string `json:"link"`
	Snippet  string `json:"snippet"`
}

var (
	domains = []string{"example.com", "reviews.example.org", "shop.example.net", "wiki.example.org",
		"forum.example.com", "news.example.net", "blog.example.com", "guide.example.org",
		"compare.example.com", "video.example.net", "deals.example.com", "lab.example.org"}
	titleForms = []string{"%s: the complete guide", "Best %s of the year, tested", "%s - reviews and ratings",
		"How to choose a %s", "%s explained in five minutes", "Top 10 %s picks", "%s vs the alternatives",
		"Everything about %s", "%s: prices and deals", "Why %s matters"}
	snippetForms = []string{"We compared every %s we could find in %s and ranked them by what matters.",
		"A practical look at %s for readers in %s, with notes from long-term use.",
		"Prices, specifications and opinions on %s, updated for %s.",
		"Our editors answer the common questions about %s (%s edition)."}
)

// organic returns the deterministic results of p: the same normalised
// parameters always give the same titles, links and snippets.
func organic(p searchParams) []organicResult {
	if strings.HasPrefix(strings.ToLower(strings.TrimSpace(p.Query)), ZeroResultsPrefix) {
		return []organicResult{}
	}
	q := strings.Join(strings.Fields(strings.ToLower(p.Query)), " ")
	sum := sha256.Sum256([]byte(strings.Join([]string{q, p.Country, p.Language, p.Device}, "\x00")))
	rng := rand.New(rand.NewPCG(binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])))
	slug := slugify(q)
	out := make([]organicResult, p.Limit)
	for i := range out {
		d := domains[rng.IntN(len(domains))]
		out[i] = organicResult{
			Position: i + 1,
			Title:    capitalize(fmt.Sprintf(titleForms[rng.IntN(len(titleForms))], q)),
			Link:     fmt.Sprintf("https://%s/%s/%d", d, slug, rng.IntN(9000)+1000),
			Snippet:  fmt.Sprintf(snippetForms[rng.IntN(len(snippetForms))], q, p.Country),
		}
	}
	return out
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

// pagesFor is the number of result pages n results fill.
func pagesFor(n int) int { return (n + resultsPerPage - 1) / resultsPerPage }

func slugify(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 60 {
			break
		}
	}
	out := strings.TrimRight(b.String(), "-")
	if out == "" {
		return "q"
	}
	return out
}
