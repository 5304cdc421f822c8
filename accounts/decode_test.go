package accounts_test

import (
	"testing"

	"github.com/serpent-engine/serpent/accounts"
	"github.com/stretchr/testify/require"
)

// TestDecodeIsStrict: a value that does not say exactly which limits hold
// is refused, never read as "no limit".
func TestDecodeIsStrict(t *testing.T) {
	l, err := accounts.Decode([]byte(`{"max_in_flight":2,"rate_per_sec":1.5,"burst":3,"daily_pages":10,"daily_micros":5000,"price_micros":500}`))
	require.NoError(t, err)
	require.Equal(t, accounts.Limits{MaxInFlight: 2, RatePerSec: 1.5, Burst: 3, DailyPages: 10, DailyMicros: 5000, PriceMicros: 500}, l)
	l, err = accounts.Decode([]byte(` {} `))
	require.NoError(t, err, "no limits, said so")
	require.True(t, l.Unlimited())

	for name, value := range map[string]string{
		"null":                   `null`,
		"not JSON":               `{not json`,
		"a list":                 `[{"max_in_flight":1}]`,
		"a misspelt field":       `{"max_inflight":1}`,
		"another case":           `{"MAX_IN_FLIGHT":1}`,
		"a null field":           `{"max_in_flight":null}`,
		"a string for a number":  `{"max_in_flight":"2"}`,
		"a fraction for a count": `{"max_in_flight":1.5}`,
		"a negative cap":         `{"max_in_flight":-3}`,
		"a negative rate":        `{"rate_per_sec":-1}`,
		"beyond a bound":         `{"max_in_flight":1,"burst":150000}`,
		"a rate too slow":        `{"rate_per_sec":1e-10}`,
		"more after the object":  `{"max_in_flight":1} {}`,
		"empty":                  ``,
	} {
		l, err := accounts.Decode([]byte(value))
		require.Error(t, err, name)
		require.Equal(t, accounts.Limits{}, l, name)
	}
	_, err = accounts.Decode([]byte(`{"max_inflight":1}`))
	require.ErrorContains(t, err, `unknown field "max_inflight"`)
	require.ErrorContains(t, err, "max_in_flight", "the error names the fields there are")
}
