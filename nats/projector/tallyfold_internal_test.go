package projector

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// chargedThenBoughtAgain writes a job charged without a result, and then
// the re-purchase an operator authorised, to a fresh SERP_EVENTS: the
// re-purchase comes for a job a tally that forgets finished jobs has let
// go. It returns the job's id, how many events it had when it finished
// (the job is the log's only one: they are at sequences 1 to finished)
// and the log's last sequence.
//
// The events up to the charge are a message each; the re-purchase's are
// one message, a group, when grouped, and a message each otherwise.
func chargedThenBoughtAgain(t *testing.T, ctx context.Context, srv *natstest.Server, grouped bool) (jobID string, finished int, last uint64) {
	t.Helper()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	st, err := snats.NewEventStore(ctx, srv.JS, snats.EventStoreOptions{})
	require.NoError(t, err)
	j := projectionstest.NewJob(t, projectionstest.IDsFrom(0), "grinder", projectionstest.T0)
	j.Send()
	j.Reply(aggregate.Outcome{Status: 409, Code: "idempotency_replay_unavailable", RequestID: "req_1"})
	key, _ := j.Key()
	j.Do(aggregate.LedgerAnswer{Keys: []string{key}, RequestIDs: []string{"req_1"}, Entries: []events.LedgerEntry{
		{RequestID: "req_1", Key: key, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: j.Now}}})
	done := len(j.Log)
	j.Now = j.Now.Add(time.Hour)
	j.Do(aggregate.AuthorizeRepurchase{By: "ops", Reason: "customer needs it"})
	for i, e := range j.Log[:done] { // one message each: event i at sequence i+1
		last, err = st.Append(ctx, j.S.JobID, uint64(i), e)
		require.NoError(t, err)
	}
	if grouped {
		require.Greater(t, len(j.Log)-done, 1, "the re-purchase is a group")
		last, err = st.Append(ctx, j.S.JobID, last, j.Log[done:]...)
		require.NoError(t, err)
	} else {
		for _, e := range j.Log[done:] {
			last, err = st.Append(ctx, j.S.JobID, last, e)
			require.NoError(t, err)
		}
	}
	require.Equal(t, aggregate.StatusChargedNoResult, aggregate.Fold(j.Log[:done]).Status)
	return j.S.JobID, done, last
}

// followWith runs f until the test ends.
func followWith(t *testing.T, ctx context.Context, f *follower) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestFollowTallyWarnsWithTheJobKey: the warning FollowTally logs about a finished
// job whose events cannot be read carries the job's id under "job", the
// key every log line about a job uses (README, "Health, readiness and
// logs"), so a search for the job finds it.
func TestFollowTallyWarnsWithTheJobKey(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	// A job whose first message is not an event, then a well-formed event
	// of version 2: the tally has not seen the job, so it loads its
	// history, which cannot be read.
	id := "0123456789abcdef0123456789abcdef"
	_, err = srv.JS.Publish(ctx, snats.EventSubjectPrefix+id, []byte(`not an event`))
	require.NoError(t, err)
	j := projectionstest.NewJob(t, projectionstest.IDsFrom(0), "grinder", projectionstest.T0)
	e := j.Log[1]
	e.JobID = id
	b, err := events.Encode(e)
	require.NoError(t, err)
	_, err = srv.JS.Publish(ctx, snats.EventSubjectPrefix+id, b)
	require.NoError(t, err)

	var buf syncBuffer
	log := jsonLog(&buf)
	tally := projections.NewTally().ForgetFinished()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); FollowTally(ctx, srv.JS, tally, log) }()
	natstest.WaitFor(t, 10*time.Second, func() error {
		if got := tally.Seq(); got < 2 {
			return fmt.Errorf("counted up to %d of 2", got)
		}
		return nil
	})
	cancel()
	wg.Wait()
	var line map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &line), "one JSON line: %s", buf.Bytes())
	require.Equal(t, id, line["job"], "the line names the job under job: %s", buf.Bytes())
	require.NotContains(t, line, "job_id")
}

// jsonLog logs JSON lines to w.
func jsonLog(w io.Writer) *slog.Logger { return slog.New(slog.NewJSONHandler(w, nil)) }

// discard is a logger that writes nothing.
func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// TestFollowTallyRetriesAShortHistory: a finished job's history is read with
// direct gets, which a replica behind the leader may answer with the
// job's first events only, and no error. FollowTally takes such a history for
// a failed read and reads it again, rather than count the job's new event
// from where the job did not stand: from a history missing the job's
// last event (its charge found by the billing ledger) the tally took the
// charged_no_result job for a reconciling one, and the re-purchase drove
// serpent_jobs{state="reconciling"} to -1 and left the job counted as
// charged_no_result for good.
func TestFollowTallyRetriesAShortHistory(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) { followRetriesAShortHistory(t, grouped) })
	}
}

func followRetriesAShortHistory(t *testing.T, grouped bool) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, finished, last := chargedThenBoughtAgain(t, ctx, srv, grouped)
	st, err := snats.NewEventStore(ctx, srv.JS, snats.EventStoreOptions{})
	require.NoError(t, err)

	var loads atomic.Int32
	tally := projections.NewTally().ForgetFinished()
	followWith(t, ctx, &follower{js: srv.JS, t: tally, log: discard(), load: func(ctx context.Context, id string) ([]events.Event, uint64, error) {
		if loads.Add(1) == 1 {
			// The first answer comes from a replica that has not got
			// the job's last event before the re-purchase yet: the
			// charge the billing ledger found.
			evs, _, err := st.Load(ctx, id)
			return evs[:finished-1], uint64(finished - 1), err
		}
		return st.Load(ctx, id)
	}})
	natstest.WaitFor(t, 10*time.Second, func() error {
		if got := tally.Seq(); got != last {
			return fmt.Errorf("counted up to %d of %d", got, last)
		}
		return nil
	})
	c := tally.Counts()
	for s, n := range c.Jobs {
		require.GreaterOrEqual(t, n, 0, "jobs %s", s)
	}
	require.Equal(t, 1, c.Jobs[aggregate.StatusRetrying], "the job is bought again")
	require.Zero(t, c.Jobs[aggregate.StatusChargedNoResult], "the job left charged_no_result")
	require.Zero(t, c.Jobs[aggregate.StatusReconciling])
	require.EqualValues(t, 2, loads.Load(), "the short history was read again")
}

// TestFollowTallyPassesAJobWhoseLogLacksEvents: a history read past the new
// event (no replica behind could have answered it) that still lacks some
// of the job's versions is the log's own: reading it again changes
// nothing, so FollowTally counts the event as if the job had no history, with
// a warning naming the job, rather than stop counting for good.
func TestFollowTallyPassesAJobWhoseLogLacksEvents(t *testing.T) {
	srv := natstest.RunServer(t)
	ctx := context.Background()
	jobID, _, last := chargedThenBoughtAgain(t, ctx, srv, false)
	st, err := snats.NewEventStore(ctx, srv.JS, snats.EventStoreOptions{})
	require.NoError(t, err)

	var buf syncBuffer
	tally := projections.NewTally().ForgetFinished()
	followWith(t, ctx, &follower{js: srv.JS, t: tally, log: jsonLog(&buf), load: func(ctx context.Context, id string) ([]events.Event, uint64, error) {
		evs, seq, err := st.Load(ctx, id)
		if err != nil {
			return nil, 0, err
		}
		return append(evs[:1:1], evs[2:]...), seq, nil // version 2 is not in the log
	}})
	natstest.WaitFor(t, 10*time.Second, func() error {
		if got := tally.Seq(); got != last {
			return fmt.Errorf("counted up to %d of %d", got, last)
		}
		return nil
	})
	require.Contains(t, string(buf.Bytes()), `"job":"`+jobID+`"`)
	require.Contains(t, string(buf.Bytes()), "lacks some of its events")
}

// TestHistoryOfAJobLeaving: a job whose head left the live log loads as
// nothing. For an event whose TTL has run out that is the job leaving,
// not a replica behind; for one still live it stays an error.
func TestHistoryOfAJobLeaving(t *testing.T) {
	f := &follower{log: discard(), load: func(context.Context, string) ([]events.Event, uint64, error) { return nil, 0, nil }}
	ev := events.Event{JobID: "j", Version: 3}
	evs, err := f.history(context.Background(), projections.Record{Seq: 9, Event: ev, Expires: time.Now().Add(-time.Second)})
	require.NoError(t, err)
	require.Empty(t, evs)
	_, err = f.history(context.Background(), projections.Record{Seq: 9, Event: ev, Expires: time.Now().Add(time.Hour)})
	require.ErrorContains(t, err, "a replica behind the leader answered")
}
