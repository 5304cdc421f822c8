package consume

import (
	"context"
	"fmt"
	"strings"

	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
)

// HandleStray settles one delivery of the serpent-strays consumer, which
// reads every command subject: a command on a subject serpent reads
// (serp.cmd.schedule, serp.cmd.schedules.<op>) is acknowledged and left
// to its own consumer; any other (serp.cmd.schedul, serp.cmd.schedule.v2)
// is recorded in rec as refused, reason unknown_subject, once. The
// simulation (internal/sim) calls it too.
func HandleStray(ctx context.Context, eng *engine.Engine, rec engine.Rejections, m engine.Msg) {
	subj := m.Subject()
	if subj == snats.ScheduleSubject || strings.HasPrefix(subj, snats.ScheduleOpPrefix) {
		_ = m.Ack()
		return
	}
	eng.Refuse(ctx, rec, m, &engine.RejectError{Reason: engine.ReasonUnknownSubject, Msg: fmt.Sprintf(
		"nothing reads %s: schedule commands go on %s, schedule operations on %s<op>", subj, snats.ScheduleSubject, snats.ScheduleOpPrefix)})
}
