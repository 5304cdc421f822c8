package consume

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
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

// TestRejectionFitsAMessage: a record carries its command whole when it
// fits, and cuts it to what a message of maxPayload leaves beside its
// headers otherwise, with the command's size and digest in headers.
func TestRejectionFitsAMessage(t *testing.T) {
	for _, tc := range []struct {
		name       string
		payload    int
		maxPayload int64
		kept       int
	}{
		{"fits", 100, 1 << 20, 100},
		{"cut to the server's limit", 60 << 10, 64 << 10, 56 << 10},
		{"cut to the default", 1 << 20, 1 << 20, 1<<20 - rejectHeadroom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			payload := []byte(strings.Repeat("x", tc.payload))
			m := RejectionMsg(engine.Rejection{Subject: "serp.cmd.schedule", Seq: 7, Payload: payload, Reason: "too_large", Error: "too large"}, tc.maxPayload)
			require.Len(t, m.Data, tc.kept)
			require.Equal(t, snats.RejectSubjectPrefix+"too_large", m.Subject)
			require.Equal(t, "7", m.Header.Get(snats.HeaderCommandSeq))
			require.Equal(t, "rejected-7", m.Header.Get("Nats-Msg-Id"))
			if tc.kept < tc.payload {
				require.Equal(t, strconv.Itoa(tc.payload), m.Header.Get(snats.HeaderCommandBytes))
				require.NotEmpty(t, m.Header.Get(snats.HeaderCommandSHA256))
			} else {
				require.Empty(t, m.Header.Get(snats.HeaderCommandBytes))
			}
		})
	}
}
