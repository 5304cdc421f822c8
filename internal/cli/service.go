package cli

import (
	"context"
	"encoding/json"
	"fmt"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/serpent-engine/serpent/nats/service"
)

// askService sends one request to the serpent micro service. No answer is
// a plain error; an error answer is an *exitError saying why (the body's
// reason itself, not only its class in the header) and its code. what
// names the request in both.
func askService(ctx context.Context, nc *natsgo.Conn, what, subject string, req []byte) (*natsgo.Msg, error) {
	msg, err := nc.RequestWithContext(ctx, subject, req)
	if err != nil {
		return nil, fmt.Errorf("%s: no answer from the serpent engine on %s: %w (is serpent run up?)", what, subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		why := msg.Header.Get(micro.ErrorHeader)
		var body service.ErrorBody
		if json.Unmarshal(msg.Data, &body) == nil && body.Error != "" {
			why = body.Error
		}
		return nil, &exitError{code: 1, err: fmt.Errorf("%s: %s (%s)", what, why, code)}
	}
	return msg, nil
}
