package sandbox_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

func TestConfigJSON(t *testing.T) {
	var cfg sandbox.Config
	err := json.Unmarshal([]byte(`{"token":"local-secret-1","seed":3,"replayWindow":"2m","searchTime":"50ms",
		"slowSearchTime":1000000000,"billingDelay":"90s","freePages":5,"priceMicros":700,
		"faults":{"dropAfterSearch":0.25,"earlyExpiry":1,"billingLate":0.5}}`), &cfg)
	require.NoError(t, err)
	require.Equal(t, "local-secret-1", cfg.Token)
	require.Equal(t, 2*time.Minute, cfg.ReplayWindow)
	require.Equal(t, 50*time.Millisecond, cfg.SearchTime)
	require.Equal(t, time.Second, cfg.SlowSearchTime)
	require.Equal(t, 90*time.Second, cfg.BillingDelay)
	require.Equal(t, sandbox.Faults{DropAfterSearch: 0.25, EarlyExpiry: 1, BillingLate: 0.5}, cfg.Faults)

	out, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NotContains(t, string(out), "local-secret-1")
	require.Contains(t, string(out), `"replayWindow":"2m0s"`)
	require.Contains(t, string(out), `"billingDelay":"1m30s"`)
	require.Contains(t, string(out), `"billingLate":0.5`)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%d", "%x", "%q"} {
		require.NotContains(t, fmt.Sprintf(verb, cfg), "local-secret-1", verb)
	}

	for _, bad := range []string{`{"faults":{"dropAfter":1}}`, `{"replayWindow":"soon"}`, `{"seed":1}{}`} {
		require.Error(t, json.Unmarshal([]byte(bad), &cfg), bad)
	}
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, sandbox.Config{}.Validate())
	err := sandbox.Config{ReplayWindow: -1, BillingDelay: -1, FreePages: -2, PriceMicros: -3,
		Faults: sandbox.Faults{DropBeforeSearch: 1.5, ZeroResults: math.NaN(), BillingLate: 2}}.Validate()
	require.True(t, errors.Is(err, sandbox.ErrInvalidConfig))
	for _, want := range []string{"replayWindow", "billingDelay", "freePages", "priceMicros", "drop_before_search", "zero_results", "billing_late"} {
		require.ErrorContains(t, err, want)
	}
}
