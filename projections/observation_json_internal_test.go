package projections

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestObservationValueIsWhatMarshalWrites(t *testing.T) {
	for _, r := range []string{
		`{"organic":[{"title":"plain","position":1}],"pages":1}`,
		`{"organic":[{"title":"Tom & Jerry <b>","link":"https://x.test/?a=1&b=2"}]}`,
		"{ \"organic\" : [ ],\n \"note\": \"a\u2028b\" }",
		`{"broken":`, ``,
	} {
		o := &Observation{JobID: "j<1>", Key: "k&1", RequestID: "r1", Replayed: true, Pages: 3,
			StoredAt: time.Date(2026, 12, 5, 13, 0, 0, 123, time.FixedZone("x", 3600)), Version: 7, Result: json.RawMessage(r), Seq: 1 << 40}
		want, wantErr := json.Marshal(o)
		got, err := encodeValue(o)
		if wantErr != nil {
			require.Error(t, err, "%q", r)
			continue
		}
		require.NoError(t, err, "%q", r)
		require.Equal(t, string(want), string(got), "%q", r)
	}
	_, err := encodeValue(&Observation{StoredAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), Result: json.RawMessage(`{}`)})
	require.Error(t, err, "a time json.Marshal refuses is refused")
}
