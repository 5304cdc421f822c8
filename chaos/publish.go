package chaos

import (
	"context"
	"time"

	natsgo "github.com/nats-io/nats.go"

	snats "github.com/serpent-engine/serpent/nats"
)

// publish publishes the commands, paced over PublishFor, each until the
// server acknowledges it (through NATS restarts; the message id keeps a
// retried publish from being stored twice).
func (r *run) publish(ctx context.Context) {
	pace := r.cfg.PublishFor / time.Duration(max(len(r.cmds), 1))
	begin := time.Now()
	for i, c := range r.cmds {
		if wait := time.Until(begin.Add(time.Duration(i) * pace)); wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		m := natsgo.NewMsg(snats.ScheduleSubject)
		m.Data = c.payload
		m.Header.Set(natsgo.MsgIdHdr, c.id)
		for {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err := r.js.PublishMsg(pctx, m)
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			r.mu.Lock()
			r.rep.PublishRetries++
			r.mu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
		r.mu.Lock()
		r.rep.Published++
		r.mu.Unlock()
	}
	r.say("all %d commands published", len(r.cmds))
}
