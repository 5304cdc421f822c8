package worker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

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
