package aggregate_test

import (
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/stretchr/testify/require"
)

func TestDefaultTableIsValid(t *testing.T) {
	require.NoError(t, aggregate.DefaultTable().Validate())
}

func TestTableRows(t *testing.T) {
	tb := aggregate.DefaultTable()
	require.Equal(t, aggregate.ActionRetrySameKey, tb.Classify(503, "billing_unavailable").Action, "code beats status")
	require.Equal(t, aggregate.ActionRetryNewKey, tb.Classify(503, "anything_else").Action)
	require.Equal(t, aggregate.ActionFail, tb.Classify(409, "conflict_of_some_other_kind").Action)
	require.Equal(t, aggregate.ActionFail, tb.Classify(500, "internal").Action)

	// A deployment meets a provider code it did not know: retry it with a
	// new key, and make 500 retryable too.
	custom, err := aggregate.ParseRules([]byte(`[
		{"status":409,"code":"quota_reset","class":"retryable","action":"retry_new_key"},
		{"status":500,"class":"retryable","action":"retry_new_key"}]`))
	require.NoError(t, err)
	require.Equal(t, aggregate.ActionRetryNewKey, custom.Classify(409, "quota_reset").Action)
	require.Equal(t, aggregate.ActionRetryNewKey, custom.Classify(500, "").Action)
	require.Equal(t, aggregate.ActionReconcile, custom.Classify(409, "idempotency_replay_unavailable").Action)

	j := newJob(t)
	j.d = aggregate.Decider{Table: custom}
	key, try := j.send("w1")
	evs := j.must(aggregate.Outcome{Key: key, Try: try, Status: 500, Code: "internal"})
	require.Equal(t, []string{"OutcomeClassified", "KeyRotated"}, types(evs))
}

func TestTableRefusesRowsThatBreakPromises(t *testing.T) {
	for name, rules := range map[string]string{
		"new key on unknown":             `[{"status":0,"class":"unknown","action":"retry_new_key"}]`,
		"new key on in progress":         `[{"status":409,"code":"idempotency_in_progress","class":"in_progress","action":"retry_new_key"}]`,
		"fail on unresolved":             `[{"status":503,"code":"billing_unavailable","class":"unresolved","action":"fail"}]`,
		"store a 404":                    `[{"status":404,"class":"success","action":"store"}]`,
		"drop a 200":                     `[{"status":200,"class":"failure","action":"fail"}]`,
		"unknown action":                 `[{"status":418,"class":"failure","action":"make_tea"}]`,
		"unknown class":                  `[{"status":418,"class":"teapot","action":"fail"}]`,
		"status out of range":            `[{"status":999,"class":"failure","action":"fail"}]`,
		"unknown is not retryable":       `[{"status":0,"class":"retryable","action":"retry_same_key"}]`,
		"not json":                       `{`,
		"new key on a lost response":     `[{"status":409,"code":"idempotency_replay_unavailable","class":"replay_unavailable","action":"retry_new_key"}]`,
		"fail on a lost response":        `[{"status":409,"code":"idempotency_replay_unavailable","class":"failure","action":"fail"}]`,
		"in progress relabelled":         `[{"status":409,"code":"idempotency_in_progress","class":"retryable","action":"retry_new_key"}]`,
		"billing unavailable relabelled": `[{"status":503,"code":"billing_unavailable","class":"rate_limited","action":"retry_new_key"}]`,
		"lost response elsewhere":        `[{"status":410,"class":"replay_unavailable","action":"retry_same_key"}]`,
		"new key on a failure":           `[{"status":451,"class":"failure","action":"retry_new_key"}]`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := aggregate.ParseRules([]byte(rules))
			require.Error(t, err)
		})
	}
	tb := aggregate.DefaultTable()
	tb.Rules = tb.Rules[1:]
	require.ErrorContains(t, tb.Validate(), "unknown outcome (status 0) is required")
}

func TestBackoff(t *testing.T) {
	p := aggregate.DefaultPolicy()
	for n := 0; n < 80; n++ {
		for _, j := range []float64{0, 0.5, 0.999999} {
			d := aggregate.Backoff(p, n, j, 0)
			require.GreaterOrEqual(t, d, p.MinDelay.D())
			require.LessOrEqual(t, d, p.MaxDelay.D())
			require.LessOrEqual(t, d, max(p.MinDelay.D(), p.BaseDelay.D()<<min(n, 20)))
		}
	}
	require.Equal(t, 30*time.Second, aggregate.Backoff(p, 0, 0, 30*time.Second), "Retry-After honoured")
	require.Equal(t, p.RetryAfterMax.D(), aggregate.Backoff(p, 0, 0, 24*time.Hour), "within bounds")

	var deciles [10]int
	for n := 0; n < 1000; n++ {
		j := aggregate.Jitter("job", n)
		require.GreaterOrEqual(t, j, 0.0)
		require.Less(t, j, 1.0)
		deciles[int(j*10)]++
	}
	for i, c := range deciles {
		require.InDelta(t, 100, c, 40, "jitter spreads evenly: decile %d has %d of 1000", i, c)
	}
	require.Equal(t, aggregate.Jitter("job", 3), aggregate.Jitter("job", 3), "and is replayable")
	require.Equal(t, time.Date(2026, 12, 2, 14, 13, 0, 0, time.UTC), aggregate.KeyDeadline(p, t0))
}

func TestPolicyValidation(t *testing.T) {
	require.NoError(t, aggregate.ValidatePolicy(aggregate.DefaultPolicy()))
	p := aggregate.DefaultPolicy()
	p.SafetyMargin = p.ReplayWindow
	p.MaxKeys = 0
	p.Lease = 0
	err := aggregate.ValidatePolicy(p)
	require.ErrorContains(t, err, "safety_margin")
	require.ErrorContains(t, err, "max_keys")
	require.ErrorContains(t, err, "lease")
	_, err = aggregate.Decide(aggregate.State{}, aggregate.Schedule{JobID: "j", Body: "{}", Slot: t0, Policy: events.RetryPolicy{}}, t0, &seqIDs{})
	require.ErrorIs(t, err, aggregate.ErrInvalidInput)
}
