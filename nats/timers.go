package nats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Timers wakes jobs through SERP_WORK. A wake-up that is due already is
// published straight to serp.work.<job>; a later one is a JetStream message
// schedule on serp.timer.<job> ("@at <time>", targeting serp.work.<job>),
// stored durably and fired by the server, so timers survive restarts of
// both the engine and the server. Arming a job again replaces its timer.
// Recurring schedules' timers are alike, on serp.sched.timer.<id> and
// serp.sched.due.<id>.
//
// Timers also says which jobs and schedules have a wake-up waiting (the
// engine's Wakes and ScheduleTimers), for the sweep of lost timers.
type Timers struct {
	js  jetstream.JetStream
	now func() time.Time

	mu   sync.Mutex
	work jetstream.Stream // SERP_WORK, once looked up
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
	return t.arm(ctx, "job", jobID, TimerSubjectPrefix, WorkSubjectPrefix, at)
}

// ArmSchedule wakes a recurring schedule at its next slot.
func (t *Timers) ArmSchedule(ctx context.Context, id string, at time.Time) error {
	return t.arm(ctx, "schedule", id, ScheduleTimerPrefix, ScheduleDuePrefix, at)
}

// DisarmSchedule removes a recurring schedule's timer and pending wake-up.
func (t *Timers) DisarmSchedule(ctx context.Context, id string) error {
	s, err := t.js.Stream(ctx, WorkStream)
	if err != nil {
		return err
	}
	for _, subj := range []string{ScheduleTimerPrefix + id, ScheduleDuePrefix + id} {
		if err := s.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return fmt.Errorf("nats: disarm schedule %s: %w", id, err)
		}
	}
	return nil
}

func (t *Timers) arm(ctx context.Context, kind, id, timerPrefix, duePrefix string, at time.Time) error {
	if !at.After(t.now()) {
		if _, err := t.js.Publish(ctx, duePrefix+id, nil); err != nil {
			return fmt.Errorf("nats: wake %s %s: %w", kind, id, err)
		}
		return nil
	}
	if _, err := t.js.PublishMsg(ctx, timerMsg(timerPrefix+id, duePrefix+id, at)); err != nil {
		return fmt.Errorf("nats: arm timer of %s %s for %s: %w", kind, id, at.UTC().Format(time.RFC3339), err)
	}
	return nil
}

// TimerMsg is the message Arm writes to wake a job at a time ahead: a
// JetStream message schedule on serp.timer.<job> targeting
// serp.work.<job>. For writers that arm many at once (the bench's seeder).
func TimerMsg(jobID string, at time.Time) *natsgo.Msg {
	return timerMsg(TimerSubjectPrefix+jobID, WorkSubjectPrefix+jobID, at)
}

// timerMsg is a message schedule on subject that publishes to target at at.
func timerMsg(subject, target string, at time.Time) *natsgo.Msg {
	m := natsgo.NewMsg(subject)
	m.Header.Set("Nats-Schedule", "@at "+at.UTC().Format(time.RFC3339Nano))
	m.Header.Set("Nats-Schedule-Target", target)
	return m
}

// EachWaiting calls each with every job that has a timer or a due
// wake-up, as SERP_WORK's index of subjects says: a few requests that load
// no message, however many jobs wait (a look-up per job costs a round
// trip, and the server a block read, for each of millions of jobs waiting
// for their slots).
func (t *Timers) EachWaiting(ctx context.Context, each func(jobID string)) error {
	for _, prefix := range []string{TimerSubjectPrefix, WorkSubjectPrefix} {
		err := EachSubject(ctx, t.js, WorkStream, prefix+">", func(subject string) {
			each(strings.TrimPrefix(subject, prefix))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Waiting reports whether a job has a timer or a due wake-up.
func (t *Timers) Waiting(ctx context.Context, jobID string) (bool, error) {
	return t.hasMessage(ctx, TimerSubjectPrefix+jobID, WorkSubjectPrefix+jobID)
}

// ScheduleArmed reports whether a recurring schedule has a timer or a due
// wake-up.
func (t *Timers) ScheduleArmed(ctx context.Context, id string) (bool, error) {
	return t.hasMessage(ctx, ScheduleTimerPrefix+id, ScheduleDuePrefix+id)
}

// hasMessage reports whether SERP_WORK holds a message on any of subjects.
func (t *Timers) hasMessage(ctx context.Context, subjects ...string) (bool, error) {
	work, err := t.workStream(ctx)
	if err != nil {
		return false, err
	}
	for _, subj := range subjects {
		_, err := work.GetLastMsgForSubject(ctx, subj)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, fmt.Errorf("nats: last message on %s: %w", subj, err)
		}
	}
	return false, nil
}

// workStream looks SERP_WORK up once: a sweep may ask about many jobs.
func (t *Timers) workStream(ctx context.Context) (jetstream.Stream, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.work == nil {
		work, err := t.js.Stream(ctx, WorkStream)
		if err != nil {
			return nil, fmt.Errorf("nats: stream %s: %w", WorkStream, err)
		}
		t.work = work
	}
	return t.work, nil
}
