package nats

import (
	"context"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HeaderSchedule names the recurring schedule that published a command.
const HeaderSchedule = "Serpent-Schedule"

// Orders publishes the schedule commands of recurring schedules' slots on
// serp.cmd.schedule (engine.Orders), as an upstream system would.
type Orders struct {
	js jetstream.JetStream
}

// NewOrders publishes with js.
func NewOrders(js jetstream.JetStream) *Orders { return &Orders{js: js} }

// Order publishes a schedule command with id as its message id: the
// stream drops the same id again within its duplicate window.
func (o *Orders) Order(ctx context.Context, cmd []byte, id, schedule string) error {
	m := natsgo.NewMsg(ScheduleSubject)
	m.Data = cmd
	m.Header.Set(natsgo.MsgIdHdr, id)
	m.Header.Set(HeaderSchedule, schedule)
	_, err := o.js.PublishMsg(ctx, m)
	return err
}
