package worker

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
)

// TestFieldsHeaderStaysJSON: a rejection's field errors that would outgrow
// their header keep as many whole fields as fit, as JSON, and say how many
// were left out (cut mid-way, the header was no longer JSON).
func TestFieldsHeaderStaysJSON(t *testing.T) {
	var fields []aggregate.FieldError
	for i := range 40 {
		fields = append(fields, aggregate.FieldError{Field: "f" + strings.Repeat("x", i), Message: strings.Repeat("bad\n", 100)})
	}
	got, omitted := fieldsHeader(fields, 2048)
	require.LessOrEqual(t, len(got), 2048)
	var back []aggregate.FieldError
	require.NoError(t, json.Unmarshal([]byte(got), &back), got)
	require.NotEmpty(t, back)
	require.Equal(t, len(fields), len(back)+omitted)
	require.Equal(t, "f", back[0].Field)
	require.NotContains(t, got, `\n`, "one line")

	few := fields[:2]
	few[0].Message, few[1].Message = "is required", "is not desktop or mobile"
	got, omitted = fieldsHeader(few, 2048)
	require.Zero(t, omitted)
	require.JSONEq(t, `[{"field":"f","message":"is required"},{"field":"fx","message":"is not desktop or mobile"}]`, got)
}

// TestShapeNamesTheField: a field named twice or in another case is named
// with its path, at any depth.
func TestShapeNamesTheField(t *testing.T) {
	s := definitionShape
	require.NoError(t, s.check([]byte(`{"id":"a","catch_up":{"policy":"fire","limit":3},"start":"2026-12-01T00:00:00Z"}`)))
	require.ErrorContains(t, s.check([]byte(`{"id":"a","catch_up":{"limit":3,"limit":50}}`)), `"catch_up.limit" twice`)
	require.ErrorContains(t, s.check([]byte(`{"id":"a","catch_up":{"Policy":"fire"}}`)), `"catch_up.Policy"; the fields of catch_up are, in lower case: policy, limit`)
	require.ErrorContains(t, s.check([]byte(`{"ID":"a"}`)), `"ID"; the fields are, in lower case: id, schedule`)
	require.NoError(t, s.check([]byte(`not an object`)), "left to the decoder")
}
