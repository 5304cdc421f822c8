package engine_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/engine"
)

// commandWithQuery is a valid command whose query is q as written in JSON.
func commandWithQuery(q string) []byte {
	return []byte(`{"slot":"2026-12-02T14:00:00Z","query":"` + q + `","country":"US","language":"en","device":"mobile"}`)
}

// TestLoneSurrogateIsRefused: half of a UTF-16 surrogate pair escaped
// alone is no character. encoding/json reads it as U+FFFD, as it would
// raw invalid bytes (which intake refuses for that reason), so two
// different commands would become one job for a query neither publisher
// sent. Intake refuses them as malformed.
func TestLoneSurrogateIsRefused(t *testing.T) {
	for _, q := range []string{`espresso \ud800`, `espresso \udfff`, `\ud800x`, `\ud800\u0041`, `\ud800\ud800\udc00`, `\ud800\n`, `\uDBFF`} {
		_, err := engine.ParseCommand(commandWithQuery(q))
		var rej *engine.RejectError
		require.ErrorAs(t, err, &rej, q)
		require.Equal(t, engine.ReasonMalformed, rej.Reason, q)
		require.Contains(t, rej.Error(), "surrogate", q)
	}
}

// TestSurrogatePairsStillTaken: a pair is one character, an escaped
// backslash before "ud800" is no escape, and U+FFFD written as such is a
// character like any other.
func TestSurrogatePairsStillTaken(t *testing.T) {
	for _, q := range []string{`espresso \ud83d\ude00`, `a\\ud800`, `\u00e9 \ufffd`, `\uD83D\uDE00 and \ud83d\ude00`} {
		_, err := engine.ParseCommand(commandWithQuery(q))
		require.NoError(t, err, q)
	}
}
