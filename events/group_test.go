package events_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
)

func TestGroupRoundTrip(t *testing.T) {
	s := samples()
	evs := []events.Event{
		sampleEvent(s[events.TypeJobScheduled], 1),
		sampleEvent(s[events.TypeAttemptCreated], 2),
		sampleEvent(s[events.TypeSent], 3),
	}
	var bodies [][]byte
	for _, e := range evs {
		b, err := events.Encode(e)
		require.NoError(t, err)
		bodies = append(bodies, b)
	}
	got, err := events.DecodeAll(events.Group(bodies))
	require.NoError(t, err)
	require.Equal(t, evs, got)
	last, err := events.DecodeLast(events.Group(bodies))
	require.NoError(t, err)
	require.Equal(t, evs[2], last)

	one, err := events.DecodeAll(events.Group(bodies[:1]))
	require.NoError(t, err, "one event is its own body")
	require.Equal(t, evs[:1], one)

	spaced := append(append([]byte(" [ "), bodies[0]...), append([]byte(" ,\n"), append(bodies[1], " ] "...)...)...)
	got, err = events.DecodeAll(spaced)
	require.NoError(t, err, "white space around the elements is JSON")
	require.Equal(t, evs[:2], got)
}

func TestGroupRefusals(t *testing.T) {
	s := samples()
	enc := func(e events.Event) string {
		b, err := events.Encode(e)
		require.NoError(t, err)
		return string(b)
	}
	a, b := sampleEvent(s[events.TypeJobScheduled], 1), sampleEvent(s[events.TypeAttemptCreated], 2)
	other := b
	other.JobID = "0123456789abcdef0123456789abcdef"
	skipped := sampleEvent(s[events.TypeAttemptCreated], 3)
	for name, body := range map[string]string{
		"empty":               `[]`,
		"one":                 `[` + enc(a) + `]`,
		"cut short":           `[` + enc(a) + `,`,
		"unclosed":            `[` + enc(a) + `,` + enc(b),
		"trailing comma":      `[` + enc(a) + `,` + enc(b) + `,]`,
		"after the array":     `[` + enc(a) + `,` + enc(b) + `] {}`,
		"not an event inside": `[` + enc(a) + `,1]`,
		"two jobs":            `[` + enc(a) + `,` + enc(other) + `]`,
		"a version skipped":   `[` + enc(a) + `,` + enc(skipped) + `]`,
		"a version repeated":  `[` + enc(a) + `,` + enc(a) + `]`,
		"arrays inside":       `[[` + enc(a) + `],[` + enc(b) + `]]`,
	} {
		_, err := events.DecodeAll([]byte(body))
		require.Error(t, err, name)
	}
}
