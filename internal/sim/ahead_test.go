package sim

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
)

// runWorld runs cfg in a synctest bubble of t, with before applied to the
// world before it runs and after to it once it is checked, both in the
// bubble.
func runWorld(t *testing.T, cfg Config, before, after func(*World)) *Report {
	t.Helper()
	var rep *Report
	synctest.Test(t, func(t *testing.T) {
		w, err := newWorld(cfg)
		require.NoError(t, err)
		if before != nil {
			before(w)
		}
		rep = w.run()
		if after != nil {
			after(w)
		}
	})
	return rep
}

// aheadConfig is a world whose commands are all published 5 minutes or
// more before their slot, with the usual faults and bad commands.
func aheadConfig(seed uint64) Config {
	cfg := RandomConfig(seed, 60)
	cfg.Spread, cfg.Ahead = 30*time.Minute, 5*time.Minute
	return cfg
}

// TestCommandsAheadOfTheirSlot: every command is published well before its
// slot. The intake (engine.Engine.HandleCommand, as in production) must
// store each job and arm its timer while holding the command; each job
// must then be finished, and sent at its slot, not before, through the
// work consumer's handler. A bug in the intake that lost jobs scheduled ahead of their
// slot passed the simulation while it called Engine.Schedule instead.
func TestCommandsAheadOfTheirSlot(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		cfg := aheadConfig(seed)
		rep := runWorld(t, cfg, nil, func(w *World) {
			for _, c := range w.cmds {
				if c.job == "" {
					continue
				}
				require.True(t, c.publishAt.Before(slotOf(t, c)), "command of job %s published after its slot", c.job)
				evs, _, err := w.store.Load(context.Background(), c.job)
				require.NoError(t, err)
				s := aggregate.Fold(evs)
				require.True(t, s.Status.Terminal(), "job %s is %s", c.job, s.Status)
				for _, a := range s.Attempts {
					require.False(t, a.FirstSend.Before(s.Slot), "job %s sent at %s, before its slot %s", c.job, a.FirstSend, s.Slot)
				}
			}
		})
		require.False(t, rep.Failed(), "seed %d:\n%s", seed, rep)
		require.Positive(t, rep.Final[aggregate.StatusSucceeded], "seed %d", seed)
	}
}

// TestIntakeLosingFutureTimersIsCaught breaks the intake the way the bug
// did: a job whose slot is in the future gets no timer from the intake
// (the arm is dropped, unsaid), and the command is acknowledged. Nothing
// wakes the job: the world must fail, naming jobs left scheduled.
func TestIntakeLosingFutureTimersIsCaught(t *testing.T) {
	cfg := aheadConfig(1)
	rep := runWorld(t, cfg, func(w *World) {
		w.breakPorts = func(t *task, p Ports) Ports {
			if t.msg.cmd != nil {
				p.Timers = droppedFutureArms{p.Timers}
			}
			return p
		}
	}, nil)
	require.True(t, rep.Failed(), "an intake that arms no timer for future jobs went unseen:\n%s", rep)
	stuck := 0
	for _, f := range rep.Failures {
		if strings.Contains(f, "is still scheduled") {
			stuck++
		}
	}
	require.Positive(t, stuck, "%s", rep)
}

// droppedFutureArms drops the arming of every timer not due yet.
type droppedFutureArms struct{ engine.Timers }

func (d droppedFutureArms) Arm(ctx context.Context, jobID string, at time.Time) error {
	if at.After(time.Now()) {
		return nil
	}
	return d.Timers.Arm(ctx, jobID, at)
}

// slotOf is the slot of a valid command.
func slotOf(t *testing.T, c *command) time.Time {
	cmd, err := engine.ParseCommand(c.payload)
	require.NoError(t, err)
	slot, err := time.Parse(time.RFC3339, cmd.Slot)
	require.NoError(t, err)
	return slot
}
