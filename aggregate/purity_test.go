package aggregate_test

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// purePackages must stay free of I/O: they are folded during replays and
// audits, and their decisions must depend only on their inputs.
var purePackages = []string{"../events", "../aggregate", "../projections", "../recurring", "../audit", "../accounts",
	"../internal/jsonraw"}

// Imports a pure package may not use directly: I/O, the clock's sources of
// randomness, and serpent's own I/O packages.
var forbiddenDirect = []string{"os", "io/fs", "syscall", "net", "net/http", "os/exec", "math/rand", "math/rand/v2",
	"crypto/rand", "log", "log/slog", "database/sql"}

// Packages that may not appear anywhere in a pure package's dependencies.
var forbiddenAnywhere = []string{"net", "net/http", "os/exec", "github.com/nats-io/"}

func TestPurePackagesDoNoIO(t *testing.T) {
	for _, dir := range purePackages {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			require.NoError(t, err)
			for _, imp := range src.Imports {
				path := strings.Trim(imp.Path.Value, `"`)
				for _, bad := range forbiddenDirect {
					require.NotEqual(t, bad, path, "%s imports %s", f, path)
				}
				if strings.Contains(path, "/serpent/") {
					require.True(t, strings.HasSuffix(path, "/serpent/events") || strings.HasSuffix(path, "/serpent/aggregate") ||
						strings.HasSuffix(path, "/serpent/internal/jsonraw"),
						"%s imports %s: pure packages import only events, aggregate and internal/jsonraw", f, path)
				}
			}
			body, err := exec.Command("grep", "-n", `time\.Now()\|time\.Since(\|time\.Until(`, f).Output()
			if err == nil {
				t.Errorf("%s reads the clock:\n%s", f, body)
			}
		}
		out, err := exec.Command("go", "list", "-deps", dir).Output()
		require.NoError(t, err)
		for _, dep := range strings.Fields(string(out)) {
			for _, bad := range forbiddenAnywhere {
				if dep == bad || (strings.HasSuffix(bad, "/") && strings.HasPrefix(dep, bad)) {
					t.Errorf("%s depends on %s", dir, dep)
				}
			}
		}
	}
}
