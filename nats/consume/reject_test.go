package consume_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/consume"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// TestCommandsThatCannotBeRecordedWhole: commands refused with a payload
// too large to be copied into a rejection record with its headers, and
// schedule commands naming an id that is no key, are recorded (the first
// bytes, with the command's size and digest) and acknowledged, not
// delivered again for ever.
func TestCommandsThatCannotBeRecordedWhole(t *testing.T) {
	l := setupLive(t, sandbox.Faults{})
	eng := l.engine("w", engine.Hooks{})
	l.start(eng, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	schedules, err := l.newSchedules(snats.NewTimers(l.srv.JS, nil), nil)
	require.NoError(t, err)
	cmds, err := snats.Consumer(ctx, l.srv.JS, snats.CommandStream, snats.ScheduleAdminConsumer)
	require.NoError(t, err)
	l.goRun(func(ctx context.Context) {
		_ = consume.ScheduleCommands(ctx, eng, schedules, consume.NewRejections(l.srv.JS), cmds, consume.Options{})
	})

	big := `{"query":"` + strings.Repeat("x", int(l.srv.JS.Conn().MaxPayload())-200) + `"}`
	l.publish(big)
	_, err = l.srv.JS.Publish(ctx, "serp.cmd.schedules.pause", []byte("no such"))
	require.NoError(t, err)
	natstest.WaitFor(t, 20*time.Second, func() error {
		got := l.rejections()
		if got[snats.RejectSubjectPrefix+engine.ReasonTooLarge] != 1 || got[snats.RejectSubjectPrefix+engine.ReasonMalformed] != 1 {
			return fmt.Errorf("rejections so far: %v", got)
		}
		return nil
	})
	st, err := l.srv.JS.Stream(ctx, snats.RejectStream)
	require.NoError(t, err)
	rec, err := st.GetLastMsgForSubject(ctx, snats.RejectSubjectPrefix+engine.ReasonTooLarge)
	require.NoError(t, err)
	sum := sha256.Sum256([]byte(big))
	require.Equal(t, strconv.Itoa(len(big)), rec.Header.Get(snats.HeaderCommandBytes))
	require.Equal(t, hex.EncodeToString(sum[:]), rec.Header.Get(snats.HeaderCommandSHA256))
	require.True(t, strings.HasPrefix(big, string(rec.Data)))
	require.Less(t, len(rec.Data), len(big))
	for _, name := range []string{snats.IntakeConsumer, snats.ScheduleAdminConsumer} {
		c, err := l.srv.JS.Consumer(ctx, snats.CommandStream, name)
		require.NoError(t, err)
		natstest.WaitFor(t, 10*time.Second, func() error {
			ci, err := c.Info(ctx)
			if err != nil || ci.NumAckPending != 0 {
				return fmt.Errorf("%s: %d not acknowledged (%v)", name, ci.NumAckPending, err)
			}
			return nil
		})
	}
}

// TestCommandsOnUnknownSubjects: a command published on a serp.cmd
// subject nothing reads (a typo, a version serpent does not know) is
// stored by SERP_COMMANDS; the serpent-strays consumer makes it a
// rejection saying where commands go instead of leaving it unread.
// Schedule commands and operations are left to their own consumers.
func TestCommandsOnUnknownSubjects(t *testing.T) {
	l := setupLive(t, sandbox.Faults{})
	eng := l.engine("w", engine.Hooks{})
	l.start(eng, 1)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	strays, err := snats.Consumer(ctx, l.srv.JS, snats.CommandStream, snats.StrayConsumer)
	require.NoError(t, err)
	l.goRun(func(ctx context.Context) {
		_ = consume.Strays(ctx, eng, consume.NewRejections(l.srv.JS), strays, consume.Options{})
	})
	for _, subj := range []string{"serp.cmd.schedul", "serp.cmd.schedule.v2", "serp.cmd.schedules", snats.ScheduleOpPrefix + "pause"} {
		_, err := l.srv.JS.Publish(ctx, subj, []byte(cmdFor(1)))
		require.NoError(t, err)
	}
	l.publish(cmdFor(2))
	l.waitSettled(snats.IntakeConsumer, snats.StrayConsumer)
	require.Equal(t, map[string]int{snats.RejectSubjectPrefix + engine.ReasonUnknownSubject: 3}, l.rejections())
	st, err := l.srv.JS.Stream(ctx, snats.RejectStream)
	require.NoError(t, err)
	rec, err := st.GetLastMsgForSubject(ctx, snats.RejectSubjectPrefix+engine.ReasonUnknownSubject)
	require.NoError(t, err)
	require.Contains(t, []string{"serp.cmd.schedul", "serp.cmd.schedule.v2", "serp.cmd.schedules"}, rec.Header.Get(snats.HeaderCommandSubject))
	require.Contains(t, rec.Header.Get(snats.HeaderRejectError), "schedule commands go on serp.cmd.schedule")
	require.Equal(t, cmdFor(1), string(rec.Data))
	l.waitTerminal([]string{jobFor(t, cmdFor(2))}, 20*time.Second)
}

// TestScheduleDeleteDeliveredAgain: a delete delivered again (its first
// delivery's acknowledgement lost) finds its schedule gone, as it asked,
// and is acknowledged without a rejection; a delete of a schedule that
// never was, delivered once, is still recorded as refused.
func TestScheduleDeleteDeliveredAgain(t *testing.T) {
	l := setupLive(t, sandbox.Faults{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cmds, err := snats.Consumer(ctx, l.srv.JS, snats.CommandStream, snats.ScheduleAdminConsumer)
	require.NoError(t, err)
	_, err = l.srv.JS.Publish(ctx, "serp.cmd.schedules.delete", []byte("gone"))
	require.NoError(t, err)
	batch, err := cmds.Fetch(1) // a first delivery, as if its engine died before acknowledging
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.Nak())
	}
	_, err = l.srv.JS.Publish(ctx, "serp.cmd.schedules.delete", []byte("never-was"))
	require.NoError(t, err)

	eng := l.engine("w", engine.Hooks{})
	schedules, err := l.newSchedules(snats.NewTimers(l.srv.JS, nil), nil)
	require.NoError(t, err)
	l.goRun(func(ctx context.Context) {
		_ = consume.ScheduleCommands(ctx, eng, schedules, consume.NewRejections(l.srv.JS), cmds, consume.Options{})
	})
	l.waitSettled(snats.ScheduleAdminConsumer)
	require.Equal(t, map[string]int{snats.RejectSubjectPrefix + "no_such_schedule": 1}, l.rejections(), "only the delete of a schedule that never was")
}

// TestCommandsParsedStrictly: bytes that are not UTF-8 (the decoder would
// have replaced them, and bought a search for another query), data after
// the object, a field named twice or in another case are malformed; a slot at Go's zero time is refused as a
// slot, not retried for ever.
func TestCommandsParsedStrictly(t *testing.T) {
	ok := `{"slot":"2026-12-02T14:00:00Z","query":"espresso scale","country":"US","language":"en","device":"mobile"}`
	for name, payload := range map[string]string{
		"not UTF-8":        strings.Replace(ok, "espresso", "caf\xe9", 1),
		"a brace too many": ok + "}",
		"a bracket after":  ok + " ]",
		// encoding/json takes the last of two and any case: which query
		// did the publisher mean?
		"a field twice":       strings.Replace(ok, `"query":"espresso scale"`, `"query":"espresso scale","query":"milk jug"`, 1),
		"a field in capitals": strings.Replace(ok, `"query"`, `"Query"`, 1),
		"both spellings":      strings.Replace(ok, `"query":"espresso scale"`, `"query":"espresso scale","QUERY":"milk jug"`, 1),
		"escaped name twice":  strings.Replace(ok, `"query":"espresso scale"`, `"query":"espresso scale","q\u0075ery":"milk jug"`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := engine.ParseCommand([]byte(payload))
			var rej *engine.RejectError
			require.ErrorAs(t, err, &rej)
			require.Equal(t, engine.ReasonMalformed, rej.Reason)
		})
	}
	c, err := engine.ParseCommand([]byte(strings.Replace(ok, "2026-12-02T14:00:00Z", "0001-01-01T00:00:00Z", 1)))
	require.NoError(t, err)
	_, err = aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "")
	var ve *aggregate.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "invalid_slot", ve.Reason())
}

// flakyRejections fails its first fails records, then passes the rest
// on; it counts the records asked for.
type flakyRejections struct {
	engine.Rejections
	fails atomic.Int32
	asked atomic.Int32
}

func (f *flakyRejections) Reject(ctx context.Context, r engine.Rejection) error {
	f.asked.Add(1)
	if f.fails.Add(-1) >= 0 {
		return errors.New("no responders")
	}
	return f.Rejections.Reject(ctx, r)
}

// TestStrayRecordedWhenItsRecordFailedOnce: a command on a subject
// nothing reads whose rejection record cannot be written (the reject
// stream unreachable for a moment) is not acknowledged: it comes back
// and is recorded once, not lost and not twice.
func TestStrayRecordedWhenItsRecordFailedOnce(t *testing.T) {
	l := setupLive(t, sandbox.Faults{})
	eng := l.engine("w", engine.Hooks{})
	ctx := context.Background()
	strays, err := snats.Consumer(ctx, l.srv.JS, snats.CommandStream, snats.StrayConsumer)
	require.NoError(t, err)
	rec := &flakyRejections{Rejections: consume.NewRejections(l.srv.JS)}
	rec.fails.Store(1)
	l.goRun(func(ctx context.Context) { _ = consume.Strays(ctx, eng, rec, strays, consume.Options{}) })
	_, err = l.srv.JS.Publish(ctx, "serp.cmd.schedul", []byte(cmdFor(1)))
	require.NoError(t, err)

	natstest.WaitFor(t, 20*time.Second, func() error {
		if got := l.rejections(); got[snats.RejectSubjectPrefix+engine.ReasonUnknownSubject] != 1 {
			return fmt.Errorf("after %d records asked for, rejections %v", rec.asked.Load(), got)
		}
		return nil
	})
	l.waitSettled(snats.StrayConsumer)
	require.EqualValues(t, 2, rec.asked.Load(), "refused once, recorded on its second delivery")
	require.Equal(t, map[string]int{snats.RejectSubjectPrefix + engine.ReasonUnknownSubject: 1}, l.rejections())
}

// TestCommandsTakenForSomethingElse: input a publisher could mean in
// another way is refused with a reason that says so, or read as the
// README says.
func TestCommandsTakenForSomethingElse(t *testing.T) {
	ok := `{"slot":"2026-12-02T14:00:00Z","query":"espresso scale","country":"US","language":"en","device":"mobile"}`
	reject := func(t *testing.T, payload, reason, msg string) {
		t.Helper()
		c, err := engine.ParseCommand([]byte(payload))
		if err == nil {
			_, err = aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "")
		}
		var rej *engine.RejectError
		var ve *aggregate.ValidationError
		switch {
		case errors.As(err, &rej):
			require.Equal(t, reason, rej.Reason)
		case errors.As(err, &ve):
			require.Equal(t, reason, ve.Reason())
		default:
			t.Fatalf("%s: want a rejection, got %v", payload, err)
		}
		require.ErrorContains(t, err, msg)
	}
	t.Run("null", func(t *testing.T) { reject(t, "null", engine.ReasonMalformed, "null") })
	t.Run("limit 0", func(t *testing.T) {
		reject(t, strings.Replace(ok, `}`, `,"limit":0}`, 1), "invalid_limit", "0 is outside 1..100")
	})
	t.Run("missing country", func(t *testing.T) {
		reject(t, strings.Replace(ok, `"country":"US",`, "", 1), "invalid_country", "country: is required")
	})
	t.Run("missing device", func(t *testing.T) {
		reject(t, strings.Replace(ok, `,"device":"mobile"`, "", 1), "invalid_device", "device: is required")
	})
	t.Run("limit null is the default", func(t *testing.T) {
		job := func(payload string) aggregate.Schedule {
			c, err := engine.ParseCommand([]byte(payload))
			require.NoError(t, err)
			s, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "")
			require.NoError(t, err)
			return s
		}
		withNull := job(strings.Replace(ok, `}`, `,"limit":null}`, 1))
		require.Equal(t, job(ok).JobID, withNull.JobID, "null is no limit given")
		require.Equal(t, aggregate.DefaultLimit, withNull.Search.Limit)
	})
}
