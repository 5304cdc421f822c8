package events

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// Results an observation may carry: compact, spaced, with the bytes
// json.Marshal escapes, invalid, empty.
var observationResults = []string{
	`{"organic":[{"title":"plain","position":1}],"pages":1}`,
	`{"organic":[{"title":"Tom & Jerry <b>","link":"https://x.test/?a=1&b=2"}]}`,
	"{ \"organic\" : [ ],\n \"note\": \"a\u2028b\" }",
	`{"broken":`, ``, `null`, `"just a string"`,
}

func TestObservationDataIsWhatMarshalWrites(t *testing.T) {
	for _, r := range observationResults {
		d := ObservationStored{Key: "k-<1>", RequestID: "req&1", Replayed: true, Pages: 2, Result: json.RawMessage(r)}
		want, wantErr := json.Marshal(d)
		got, err := marshalData(d)
		if wantErr != nil {
			require.Error(t, err, "%q", r)
			continue
		}
		require.NoError(t, err, "%q", r)
		require.Equal(t, string(want), string(got), "%q", r)
	}
}
