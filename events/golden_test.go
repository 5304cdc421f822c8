package events_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/serpent-engine/serpent/events"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden event files in testdata/events")

const goldenDir = "../testdata/events"

var goldenName = regexp.MustCompile(`^([A-Za-z]+)\.v([0-9]+)\.json$`)

// TestGoldenCurrent makes sure a golden file exists for every type at its
// current schema and that today's encoder still writes exactly it.
func TestGoldenCurrent(t *testing.T) {
	all := samples()
	require.ElementsMatch(t, events.Types(), keys(all), "samples must cover every event type")
	for _, typ := range events.Types() {
		t.Run(typ, func(t *testing.T) {
			e := sampleEvent(all[typ], 2)
			b, err := events.Encode(e)
			require.NoError(t, err)
			path := filepath.Join(goldenDir, fmt.Sprintf("%s.v%d.json", typ, events.CurrentSchema(typ)))
			if *update {
				require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err, "missing golden file; run go test ./events -run TestGolden -update")
			require.JSONEq(t, string(want), string(b))
		})
	}
}

// TestGoldenDecode decodes every golden file of every version ever written:
// old events must always stay readable.
func TestGoldenDecode(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			m := goldenName.FindStringSubmatch(filepath.Base(f))
			require.NotNil(t, m, "golden files are named <Type>.v<schema>.json")
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			e, err := events.Decode(b)
			require.NoError(t, err)
			require.Equal(t, m[1], e.Type())
			require.Equal(t, sampleJob, e.JobID)
		})
	}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
