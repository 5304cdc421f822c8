package sandbox_test

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

func TestResultsAreDeterministic(t *testing.T) {
	e := setup(t, sandbox.Config{})
	organic := func(body string) []any {
		r := e.search(uuid.NewString(), body)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return r.json(t)["organic"].([]any)
	}
	a := organic(espresso)
	require.Len(t, a, 10)
	require.Equal(t, a, organic(espresso), "same parameters, same results")
	require.Equal(t, a, organic(`{"query":"  ESPRESSO   scale","country":"us","language":"en","device":"mobile","limit":10}`),
		"normalised: case and spaces do not matter")
	require.NotEqual(t, a, organic(`{"query":"espresso scale","country":"DE","language":"en","device":"mobile","limit":10}`))
	first := a[0].(map[string]any)
	require.Equal(t, float64(1), first["position"])
	require.Regexp(t, `^https://[a-z.]+/espresso-scale/\d+$`, first["link"])
	require.NotEmpty(t, first["title"])
	require.NotEmpty(t, first["snippet"])
}
