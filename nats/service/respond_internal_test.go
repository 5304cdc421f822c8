package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
)

// refusingRequest is a request whose answers the server refuses (one
// larger than its max payload, say), and that records its error answer.
type refusingRequest struct {
	micro.Request
	code, desc string
	data       []byte
}

func (r *refusingRequest) RespondJSON(any, ...micro.RespondOpt) error {
	return errors.New("nats: maximum payload exceeded")
}

func (r *refusingRequest) Error(code, desc string, data []byte, _ ...micro.RespondOpt) error {
	r.code, r.desc, r.data = code, desc, data
	return nil
}

// TestAnAnswerTooBigIsAnError: serpent.schedules.list with hundreds of
// schedules outgrew the server's message limit, and the caller waited for
// an answer that never came ("is serpent run up?"); it gets a 500 saying
// why.
func TestAnAnswerTooBigIsAnError(t *testing.T) {
	r := &refusingRequest{}
	respond(r, []string{"a", "b"})
	require.Equal(t, "500", r.code)
	var body ErrorBody
	require.NoError(t, json.Unmarshal(r.data, &body))
	require.Contains(t, body.Error, "maximum payload exceeded")
}

func TestCallerMessages(t *testing.T) {
	until := time.Date(2026, 12, 2, 14, 0, 30, 0, time.UTC)
	for err, want := range map[error]string{
		aggregate.ErrNoJob:    "no such job: nothing was scheduled with this job id",
		aggregate.ErrTerminal: "the job is finished: nothing can change it now",
		&aggregate.LeasedError{Worker: "w1", Until: until}:                           "a search of this job is in flight (worker w1 holds it until 2026-12-02T14:00:30Z): try again after that",
		fmt.Errorf("%w: a cancellation says who cancels", aggregate.ErrInvalidInput): "invalid input: a cancellation says who cancels",
	} {
		require.Equal(t, want, callerMessage(err))
	}
}
