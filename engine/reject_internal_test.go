package engine

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
