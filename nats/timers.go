package nats

import (
	"context"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Timers wakes jobs through SERP_WORK. A wake-up that is due already is
// published straight to serp.work.<job>; a later one is a JetStream message
// schedule on serp.timer.<job> ("@at <time>", targeting serp.work.<job>),
// stored durably and fired by the server, so timers survive restarts of
// both the engine and the server. Arming a job again replaces its timer.
type Timers struct {
	js  jetstream.JetStream
	now func() time.Time
}

// NewTimers returns timers on SERP_WORK.
func NewTimers(js jetstream.JetStream, now func() time.Time) *Timers {
	if now == nil {
		now = time.Now
	}
	return &Timers{js: js, now: now}
}

// Arm wakes the job at the given time (or now, if it has passed).
func (t *Timers) Arm(ctx context.Context, jobID string, at time.Time) error {
	if !at.After(t.now()) {
		_, err := t.js.Publish(ctx, WorkSubjectPrefix+jobID, nil)
		if err != nil {
			return fmt.Errorf("nats: wake job %s: %w", jobID, err)
		}
		return nil
	}
	m := natsgo.NewMsg(TimerSubjectPrefix + jobID)
	m.Header.Set("Nats-Schedule", "@at "+at.UTC().Format(time.RFC3339Nano))
	m.Header.Set("Nats-Schedule-Target", WorkSubjectPrefix+jobID)
	if _, err := t.js.PublishMsg(ctx, m); err != nil {
		return fmt.Errorf("nats: arm timer of job %s for %s: %w", jobID, at.UTC().Format(time.RFC3339), err)
	}
	return nil
}
