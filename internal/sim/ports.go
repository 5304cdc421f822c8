package sim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/serper"
)

// The errors a task's ports return when the scheduler says so.
var (
	errDead        = errors.New("sim: the worker process died")
	errUnreachable = errors.New("sim: the store is unreachable")
)

// Ports are the world as one task sees it: the event store, the API and
// the timers, each yielding to the scheduler where the world could change
// under the task, and the engine's crash hooks. A Stepper is built on them.
type Ports struct {
	Name   string
	Store  engine.Store
	API    engine.API
	Timers engine.Timers
	Hooks  engine.Hooks
	IDs    aggregate.IDs
}

func (w *World) ports(t *task) Ports {
	hook := func(string) error {
		if w.yield(t, ptHook) == vDead {
			return engine.ErrCrash
		}
		return nil
	}
	p := Ports{
		Name:   t.worker.name,
		Store:  taskStore{w, t},
		API:    taskAPI{w, t},
		Timers: taskTimers{w, t},
		Hooks:  engine.Hooks{AfterSchedule: hook, AfterClaim: hook, AfterSearch: hook, AfterRecord: hook},
		IDs:    newIDs(w.cfg.Seed, uint64(t.id), time.Now),
	}
	if w.breakPorts != nil {
		p = w.breakPorts(t, p)
	}
	return p
}

// taskStore is the in-memory store seen through one task.
type taskStore struct {
	w *World
	t *task
}

func (s taskStore) Load(ctx context.Context, jobID string) ([]events.Event, uint64, error) {
	switch s.w.yield(s.t, ptLoad) {
	case vDead:
		return nil, 0, errDead
	case vFail:
		return nil, 0, errUnreachable
	}
	return s.w.store.Load(ctx, jobID)
}

func (s taskStore) Append(ctx context.Context, jobID string, expected uint64, evs ...events.Event) (uint64, error) {
	switch s.w.yield(s.t, ptAppend) {
	case vDead:
		return 0, errDead
	case vFail:
		return 0, errUnreachable
	}
	v, err := s.w.store.Append(ctx, jobID, expected, evs...)
	if err != nil {
		return v, err
	}
	switch s.w.yield(s.t, ptAppended) {
	case vDead:
		return 0, errDead
	case vLost:
		return 0, fmt.Errorf("%w: sim: the reply to the append was lost", eventstore.ErrUnknownOutcome)
	}
	return v, nil
}

// taskAPI is the sandbox, through the real client, seen through one task.
type taskAPI struct {
	w *World
	t *task
}

func (a taskAPI) Search(ctx context.Context, key string, body []byte) serper.Result {
	handed := time.Now()
	switch a.w.yield(a.t, ptSend) {
	case vDead:
		return serper.Result{Unknown: serper.UnknownCanceled, Detail: "the worker died before the request left"}
	case vLost:
		var stop func()
		ctx, stop = withCut(ctx, a.t.cutAfter)
		defer stop()
	}
	a.w.recordSend(key, handed, time.Now())
	res := a.w.client.Search(ctx, key, body)
	a.w.yield(a.t, ptReply) // a crash here loses the reply; the task's writes fail from now on
	return res
}

func (a taskAPI) Ledger(ctx context.Context, q serper.LedgerQuery) ([]serper.LedgerEntry, error) {
	switch a.w.yield(a.t, ptLedger) {
	case vDead:
		return nil, errDead
	case vFail:
		return nil, &serper.LedgerError{Status: 503, Code: "service_unavailable", Message: "sim: ledger down", RequestID: "sim"}
	}
	return a.w.client.Ledger(ctx, q)
}

// taskTimers arms timers in the world's model of SERP_WORK.
type taskTimers struct {
	w *World
	t *task
}

func (tt taskTimers) Arm(_ context.Context, jobID string, at time.Time) error {
	switch tt.w.yield(tt.t, ptArm) {
	case vDead:
		return errDead
	case vFail:
		return errors.New("sim: arming the timer failed")
	}
	tt.w.mu.Lock()
	tt.w.q.arm(jobID, at, time.Now())
	tt.w.mu.Unlock()
	return nil
}
