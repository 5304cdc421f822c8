package sandbox_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

func TestRejectedBeforeTheKeyIsRecorded(t *testing.T) {
	long := strings.Repeat("q", 2049)
	tests := []struct {
		name   string
		body   string
		mods   []func(*http.Request)
		status int
		fields []any
	}{
		{name: "no token", body: espresso, mods: []func(*http.Request){header("Authorization", "")}, status: 401},
		{name: "wrong token", body: espresso, mods: []func(*http.Request){header("Authorization", "Bearer nope-nope")}, status: 401},
		{name: "not bearer", body: espresso, mods: []func(*http.Request){header("Authorization", "Basic "+sandbox.DefaultToken)}, status: 401},
		{name: "no key", body: espresso, mods: []func(*http.Request){header("Idempotency-Key", "")}, status: 422, fields: []any{"Idempotency-Key"}},
		{name: "key not a uuid", body: espresso, mods: []func(*http.Request){header("Idempotency-Key", "attempt-1")}, status: 422, fields: []any{"Idempotency-Key"}},
		{name: "not json content", body: espresso, mods: []func(*http.Request){header("Content-Type", "text/plain")}, status: 422, fields: []any{"Content-Type"}},
		{name: "malformed json", body: `{"query":`, status: 422, fields: []any{"body"}},
		{name: "trailing data", body: espresso + `{}`, status: 422, fields: []any{"body"}},
		{name: "not an object", body: `["espresso"]`, status: 422, fields: []any{"body"}},
		{name: "null", body: `null`, status: 422, fields: []any{"body"}},
		{name: "empty query", body: `{"query":"   "}`, status: 422, fields: []any{"query"}},
		{name: "missing query", body: `{"country":"US"}`, status: 422, fields: []any{"query"}},
		{name: "query too long", body: `{"query":"` + long + `"}`, status: 422, fields: []any{"query"}},
		{name: "query not a string", body: `{"query":7}`, status: 422, fields: []any{"query"}},
		{name: "country of 3 letters", body: `{"query":"x","country":"USA"}`, status: 422, fields: []any{"country"}},
		{name: "language uppercase", body: `{"query":"x","language":"EN"}`, status: 422, fields: []any{"language"}},
		{name: "device", body: `{"query":"x","device":"tablet"}`, status: 422, fields: []any{"device"}},
		{name: "limit 0", body: `{"query":"x","limit":0}`, status: 422, fields: []any{"limit"}},
		{name: "limit 101", body: `{"query":"x","limit":101}`, status: 422, fields: []any{"limit"}},
		{name: "limit fraction", body: `{"query":"x","limit":1.5}`, status: 422, fields: []any{"limit"}},
		{name: "unknown fields, every problem at once", body: `{"query":"","zz":1,"aa":2,"device":"tv"}`, status: 422,
			fields: []any{"query", "device", "aa", "zz"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := setup(t, sandbox.Config{})
			key := uuid.NewString()
			r := e.search(key, tt.body, tt.mods...)
			require.NoError(t, r.err)
			require.Equal(t, tt.status, r.status, "%s", r.body)
			require.NotEmpty(t, r.errorField(t, "requestId"))
			if tt.status == 401 {
				require.Equal(t, "unauthorized", r.errorField(t, "code"))
			} else {
				require.Equal(t, "invalid_request", r.errorField(t, "code"))
				require.Equal(t, tt.fields, r.errorField(t, "fields"))
			}
			st := e.srv.Stats()
			require.Zero(t, st.Executions)
			require.Zero(t, st.Charges)

			// The key was not recorded: a good request with it runs fresh.
			ok := e.search(key, espresso)
			require.Equal(t, http.StatusOK, ok.status, "%s", ok.body)
			require.Empty(t, ok.header.Get("Idempotent-Replayed"))
		})
	}
}

func TestDefaultsAndLimits(t *testing.T) {
	e := setup(t, sandbox.Config{})
	r := e.search(uuid.NewString(), `{"query":"  Espresso   Scale ","country":"de","limit":25}`)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	m := r.json(t)
	require.Equal(t, map[string]any{"query": "  Espresso   Scale ", "country": "DE", "language": "en", "device": "desktop", "limit": float64(25)}, m["search"])
	require.Len(t, m["organic"], 25)
	require.Equal(t, float64(3), m["pages"], "25 results fill 3 pages")
}

func TestWrongMethodsAndPaths(t *testing.T) {
	e := setup(t, sandbox.Config{})
	for _, path := range []string{"/v1/search", "/nope"} {
		r := e.get(path)
		require.NoError(t, r.err)
		require.Contains(t, []int{http.StatusMethodNotAllowed, http.StatusNotFound}, r.status)
		require.NotEmpty(t, r.errorField(t, "requestId"))
	}
	require.Equal(t, http.StatusUnauthorized, func() int {
		e.token = "not-the-token"
		return e.get("/v1/sandbox/stats").status
	}())
}
