package chaos

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/serper"
)

type noAPI struct{}

func (noAPI) Search(context.Context, string, []byte) serper.Result { return serper.Result{} }
func (noAPI) Ledger(context.Context, serper.LedgerQuery) ([]serper.LedgerEntry, error) {
	return nil, errors.New("no ledger")
}

type noTimers struct{}

func (noTimers) Arm(context.Context, string, time.Time) error { return nil }

// TestCommandsHeldToWhatTheRunDrew: the engine's own answer to every
// command a run draws (a job, or a rejection and its reason) is what the
// run drew it as; a rejection with another reason, a valid command
// rejected, a malformed one with no record, a record without the payload,
// a command the run did not publish and one it published that is not
// stored are each a violation. The expected reason is the one drawn with
// the command: before, it was worked out with the engine's own rules
// (engine.ParseCommand, aggregate.NewSchedule), so an engine that gave the
// wrong reason agreed with itself.
func TestCommandsHeldToWhatTheRunDrew(t *testing.T) {
	cfg := Config{Seed: 3, Jobs: 4, Duplicates: 1, Malformed: len(malformed), Spread: time.Minute}
	cmds := commands(cfg, time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC), rand.New(rand.NewPCG(3, 3)))
	eng, err := engine.New(engine.Config{Name: "check", Store: memstore.New(memstore.Options{}), API: noAPI{}, Timers: noTimers{}})
	require.NoError(t, err)
	var stored []storedCommand
	rejected := map[uint64]rejection{}
	histories := map[string][]events.Event{}
	for i, c := range cmds {
		seq := uint64(i + 1)
		stored = append(stored, storedCommand{seq: seq, id: c.id, payload: c.payload})
		out, err := eng.Schedule(context.Background(), c.payload, "chaos")
		var rej *engine.RejectError
		switch {
		case errors.As(err, &rej):
			rejected[seq] = rejection{reason: rej.Reason, payload: c.payload}
		case err != nil:
			t.Fatal(err)
		default:
			histories[out.JobID] = append(histories[out.JobID], events.Event{JobID: out.JobID})
		}
	}
	rep := newReport(cfg)
	want := checkCommands(rep, cmds, stored, rejected, histories, false)
	require.Empty(t, rep.Violations, "the engine answers a command otherwise than the run drew it")
	require.Len(t, want, cfg.Jobs)
	require.Equal(t, len(cmds), rep.Commands)

	first := func(bad bool) (int, command) {
		for i, c := range cmds {
			if (c.job == "") == bad {
				return i, c
			}
		}
		t.Fatal("no such command")
		return 0, command{}
	}
	bi, bad := first(true)
	gi, good := first(false)
	badSeq, goodSeq := uint64(bi+1), uint64(gi+1)
	other := "invalid_country"
	if bad.reason == other {
		other = "invalid_device"
	}
	for _, tc := range []struct {
		name   string
		change func(stored []storedCommand, rejected map[uint64]rejection) []storedCommand
		want   string
	}{
		{"another reason", func(s []storedCommand, r map[uint64]rejection) []storedCommand {
			r[badSeq] = rejection{reason: other, payload: bad.payload}
			return s
		}, "was rejected as " + other + ", want " + bad.reason},
		{"no record", func(s []storedCommand, r map[uint64]rejection) []storedCommand {
			delete(r, badSeq)
			return s
		}, "is invalid (" + bad.reason + ") and has no rejection record"},
		{"another payload", func(s []storedCommand, r map[uint64]rejection) []storedCommand {
			r[badSeq] = rejection{reason: bad.reason, payload: []byte("{}")}
			return s
		}, "does not hold its payload"},
		{"a valid command rejected", func(s []storedCommand, r map[uint64]rejection) []storedCommand {
			r[goodSeq] = rejection{reason: "invalid_slot", payload: good.payload}
			return s
		}, "(job " + good.job + ") was rejected as invalid_slot"},
		{"not published by the run", func(s []storedCommand, r map[uint64]rejection) []storedCommand {
			return append(s, storedCommand{seq: uint64(len(s) + 1), id: "someone-else", payload: []byte("{}")})
		}, `(message id "someone-else") is in SERP_COMMANDS but the run did not publish it`},
		{"not stored", func(s []storedCommand, r map[uint64]rejection) []storedCommand {
			return append(s[:bi:bi], s[bi+1:]...)
		}, "command " + bad.id + " was acknowledged to the publisher but is not in SERP_COMMANDS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := map[uint64]rejection{}
			for k, v := range rejected {
				r[k] = v
			}
			s := tc.change(append([]storedCommand(nil), stored...), r)
			rep := newReport(cfg)
			checkCommands(rep, cmds, s, r, histories, false)
			require.Len(t, rep.Violations, 1, "%q", rep.Violations)
			require.Contains(t, rep.Violations[0], tc.want)
		})
	}
}
