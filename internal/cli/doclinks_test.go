package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/require"
)

// TestDocLinks: every relative link of the README and of docs/ (outside
// fenced blocks and code spans) names a file that exists and, after a #,
// a heading that file has.
func TestDocLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files := append([]string{filepath.Join(root, "README.md")}, docs...)
	anchors := map[string]map[string]bool{} // file → its headings' anchors
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		anchors[path] = headingAnchors(string(data))
		return anchors[path]
	}
	link := regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	code := regexp.MustCompile("`[^`]*`")
	for _, file := range files {
		data, err := os.ReadFile(file)
		require.NoError(t, err)
		fence := false
		for n, line := range strings.Split(string(data), "\n") {
			if isFence(line) {
				fence = !fence
			}
			if fence {
				continue
			}
			for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
				}
				where := file + ":" + strconv.Itoa(n+1) + ": " + target
				_, err := os.Stat(dest)
				require.NoError(t, err, where)
				if anchor != "" {
					require.True(t, strings.HasSuffix(dest, ".md"), "%s: an anchor into a file that is not markdown", where)
					require.True(t, anchorsOf(dest)[anchor], "%s: no heading with that anchor", where)
				}
			}
		}
	}
}

// headingAnchors returns the anchors GitHub makes of a markdown file's
// headings: lower case, punctuation dropped, spaces as hyphens, and a
// heading seen before numbered from -1.
func headingAnchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, line := range strings.Split(md, "\n") {
		if isFence(line) {
			fence = !fence
			continue
		}
		hashes := len(line) - len(strings.TrimLeft(line, "#"))
		if fence || hashes == 0 || hashes > 6 || !strings.HasPrefix(line[hashes:], " ") {
			continue
		}
		text := strings.TrimSpace(strings.TrimRight(strings.TrimSpace(line[hashes:]), "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ' || r == '-':
				b.WriteRune('-')
			case r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if k := seen[a]; k > 0 {
			out[a+"-"+strconv.Itoa(k)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// isFence says whether a line opens or closes a fenced block.
func isFence(line string) bool {
	line = strings.TrimLeft(line, " ")
	return strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~")
}

// TestHeadingAnchors: anchors as GitHub makes them.
func TestHeadingAnchors(t *testing.T) {
	md := "# serpent\n## For developers: where things are\n### `serpent audit`, and the ledger\n" +
		"## Costs — per job (µs)\n## Costs — per job (µs)\n```sh\n# not a heading\n```\n#nospace\n## Done ##\n"
	require.Equal(t, map[string]bool{
		"serpent": true, "for-developers-where-things-are": true, "serpent-audit-and-the-ledger": true,
		"costs--per-job-µs": true, "costs--per-job-µs-1": true, "done": true,
	}, headingAnchors(md))
}
