package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The budgets of the README and of each page of docs/. They are a limit on
// size and sentence length, not a judge of style.
const (
	readmeMaxBytes   = 12 * 1024
	readmeMaxWords   = 2000
	pageMaxWords     = 3500
	maxSentenceWords = 40
	maxAverageWords  = 20
)

// TestDocsBudget: the README fits its budget, each page of docs/ stays
// under its word count, and no sentence anywhere passes 40 words.
func TestDocsBudget(t *testing.T) {
	for _, path := range docPages(t) {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		name := filepath.Base(path)
		words := len(strings.Fields(string(data)))
		if path == readmePath {
			require.LessOrEqual(t, len(data), readmeMaxBytes, "README.md is %d bytes: move reference to docs/", len(data))
			require.LessOrEqual(t, words, readmeMaxWords, "README.md has %d words: move reference to docs/", words)
		} else {
			require.LessOrEqual(t, words, pageMaxWords, "%s has %d words: split it or cut it", name, words)
		}
		sentences := proseSentences(string(data))
		total := 0
		for _, s := range sentences {
			n := len(strings.Fields(s))
			total += n
			require.LessOrEqual(t, n, maxSentenceWords, "%s: a sentence of %d words: %q", name, n, s)
		}
		if len(sentences) > 0 {
			avg := float64(total) / float64(len(sentences))
			require.LessOrEqual(t, avg, float64(maxAverageWords), "%s: sentences average %.1f words", name, avg)
		}
	}
}

var (
	codeSpan     = regexp.MustCompile("`[^`]*`")
	linkTarget   = regexp.MustCompile(`\]\([^)]*\)`)
	listMarker   = regexp.MustCompile(`^([-*+]|\d+\.)\s+`)
	tableRule    = regexp.MustCompile(`^\s*:?-+:?\s*$`)
	sentenceStop = regexp.MustCompile("[.!?]\\s+|[:;]\\s+[A-Z`\"(*\\[]")
)

// proseSentences splits a Markdown page's prose into sentences. Code
// blocks, headings and comments are left out; a code span counts as one
// word; each table cell, list item and paragraph ends a sentence.
func proseSentences(page string) []string {
	var paras []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			paras = append(paras, strings.Join(cur, " "))
			cur = nil
		}
	}
	fence := false
	for _, line := range strings.Split(page, "\n") {
		s := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(s, "```"):
			fence = !fence
			flush()
		case fence:
		case strings.HasPrefix(s, "|"):
			flush()
			for _, cell := range strings.Split(strings.Trim(s, "|"), "|") {
				if !tableRule.MatchString(cell) {
					paras = append(paras, cell)
				}
			}
		case s == "", strings.HasPrefix(s, "#"), strings.HasPrefix(s, "<!--"):
			flush()
		case listMarker.MatchString(s):
			flush()
			cur = append(cur, listMarker.ReplaceAllString(s, ""))
		default:
			cur = append(cur, s)
		}
	}
	flush()
	var out []string
	for _, p := range paras {
		p = codeSpan.ReplaceAllString(p, "X")
		p = linkTarget.ReplaceAllString(p, "]")
		out = append(out, splitSentences(p)...)
	}
	return out
}

// splitSentences cuts a paragraph after each full stop, question or
// exclamation mark, and after a colon or semicolon that a capital, a code
// span or a bracket follows.
func splitSentences(p string) []string {
	var out []string
	add := func(s string) {
		if strings.TrimSpace(s) != "" {
			out = append(out, s)
		}
	}
	start := 0
	for _, m := range sentenceStop.FindAllStringIndex(p, -1) {
		end := m[1]
		if c := p[end-1]; c != ' ' && c != '\t' {
			end-- // the capital that follows starts the next sentence
		}
		add(p[start : m[0]+1])
		start = end
	}
	add(p[start:])
	return out
}

func TestProseSentences(t *testing.T) {
	page := "# Title\n\nOne two three. Four five\nsix.\n\n```sh\nnot prose at all\n```\n\n| a | b c |\n|---|---|\n\n- item one\n- item `x y z` two\n"
	require.Equal(t, []string{"One two three.", "Four five six.", " a ", " b c ", "item one", "item X two"}, proseSentences(page))
	require.Equal(t, []string{"One:", "Two; three.", "`x` four"}, splitSentences("One: Two; three. `x` four"))
}
