package nats_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/storetest"
	"github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
)

// archived is a server with SERP_EVENTS, SERP_ARCHIVE sourcing it, and
// an event store on the live log.
func archived(t *testing.T) (*natstest.Server, jetstream.Stream, *nats.EventStore) {
	t.Helper()
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := nats.EnsureEventStream(ctx, srv.JS, nats.EventStreamOptions{})
	require.NoError(t, err)
	archive, err := nats.EnsureArchiveStream(ctx, srv.JS, nats.EventStreamOptions{})
	require.NoError(t, err)
	es, err := nats.NewEventStore(ctx, srv.JS, nats.EventStoreOptions{})
	require.NoError(t, err)
	return srv, archive, es
}

// TestArchiveKeepsExpiredEvents: SERP_ARCHIVE copies every event of
// SERP_EVENTS into a few partition subjects, with the original subject and
// sequence in the source header, and keeps the copies after the live log
// dropped them by their TTL: the archive does not allow message TTLs, and
// the server then ignores the Nats-TTL header the copies carry.
func TestArchiveKeepsExpiredEvents(t *testing.T) {
	srv, archive, es := archived(t)
	ctx := context.Background()

	const jobs = 6
	ids := make([]string, jobs)
	exp := eventstore.WithExpiry(ctx, time.Now().Add(time.Second))
	for i := range ids {
		ids[i] = storetest.NewJobID()
		v, err := es.Append(exp, ids[i], 0, storetest.NewEvents(ids[i], 1, 2)...)
		require.NoError(t, err)
		_, err = es.Append(exp, ids[i], v, storetest.NewEvents(ids[i], 3, 1)...)
		require.NoError(t, err)
	}
	gone := func(job string) func() error {
		return func() error {
			evs, _, err := es.Load(ctx, job)
			if err != nil {
				return err
			}
			if len(evs) > 0 {
				return fmt.Errorf("job %s has %d events in the live log", job, len(evs))
			}
			return nil
		}
	}
	for _, id := range ids {
		natstest.WaitFor(t, 15*time.Second, gone(id))
	}
	live, err := srv.JS.Stream(ctx, nats.EventStream)
	require.NoError(t, err)
	natstest.WaitFor(t, 15*time.Second, func() error {
		// The heads leave first (a job is gone then), the tails after.
		info, err := live.Info(ctx)
		if err == nil && info.State.Msgs > 0 {
			err = fmt.Errorf("the live log still holds %d messages", info.State.Msgs)
		}
		return err
	})

	// A second job that expires after the first ones' copies were stored
	// plus their TTL: once it is gone, copies the archive had let expire
	// would be gone too.
	later := storetest.NewJobID()
	_, err = es.Append(eventstore.WithExpiry(ctx, time.Now().Add(2*time.Second)), later, 0, storetest.NewEvents(later, 1, 1)...)
	require.NoError(t, err)
	natstest.WaitFor(t, 15*time.Second, gone(later))

	ainfo, err := archive.Info(ctx, jetstream.WithSubjectFilter(">"))
	require.NoError(t, err)
	require.EqualValues(t, 2*jobs+1, ainfo.State.Msgs, "every message is in the archive")
	require.LessOrEqual(t, len(ainfo.State.Subjects), nats.ArchivePartitions)
	for seq := uint64(1); seq <= ainfo.State.LastSeq; seq++ {
		m, err := archive.GetMsg(ctx, seq)
		require.NoError(t, err)
		subj, src, ok := nats.SourceOf(m.Header)
		require.True(t, ok, "message %d names its source: %v", seq, m.Header)
		require.NotZero(t, src)
		job := subj[len(nats.EventSubjectPrefix):]
		require.Equal(t, nats.ArchivePartition(job), m.Subject, "the server's partition is the one computed here")
		require.NotEmpty(t, m.Header.Get(eventstore.HeaderTTL), "the copy carries the TTL it ignores")
	}
}

// TestSourceOf: the original subject and sequence of an archived message,
// with the filter and transform fields empty or not, and with a cluster's
// identity at the end.
func TestSourceOf(t *testing.T) {
	for _, tt := range []struct {
		header string
		subj   string
		seq    uint64
		ok     bool
	}{
		{"SERP_EVENTS 12 serp.events.* serp.archive.{{partition(8,1)}} serp.events.abc", "serp.events.abc", 12, true},
		{"SERP_EVENTS 7 serp.events.* serp.archive.{{partition(8,1)}} serp.events.abc n2", "serp.events.abc", 7, true},
		{"SERP_EVENTS 3   serp.events.abc", "serp.events.abc", 3, true},
		{"OTHER 3 > > serp.events.abc", "", 0, false},
		{"SERP_EVENTS x > > serp.events.abc", "", 0, false},
	} {
		subj, seq, ok := nats.SourceOf(map[string][]string{nats.HeaderSource: {tt.header}})
		require.Equal(t, tt.ok, ok, tt.header)
		require.Equal(t, tt.subj, subj, tt.header)
		require.Equal(t, tt.seq, seq, tt.header)
	}
	_, _, ok := nats.SourceOf(nil)
	require.False(t, ok)
}

// TestArchiveLag: the archive reports how many events it has not copied
// yet, 0 once it has them all, and an error when it cannot copy the log:
// here, a SERP_ARCHIVE whose SERP_EVENTS is not there.
func TestArchiveLag(t *testing.T) {
	ctx := context.Background()
	t.Run("copying", func(t *testing.T) {
		srv, _, es := archived(t)
		for range 5 {
			id := storetest.NewJobID()
			_, err := es.Append(ctx, id, 0, storetest.NewEvents(id, 1, 2)...)
			require.NoError(t, err)
		}
		natstest.WaitFor(t, 15*time.Second, func() error {
			lag, err := nats.ArchiveLag(ctx, srv.JS)
			if err != nil {
				return err
			}
			st, err := srv.JS.Stream(ctx, nats.ArchiveStream)
			if err != nil {
				return err
			}
			if n := st.CachedInfo().State.Msgs; lag != 0 || n != 5 {
				return fmt.Errorf("archive has %d of 5 messages, %d to copy", n, lag)
			}
			return nil
		})
	})
	t.Run("no log to copy", func(t *testing.T) {
		srv := natstest.RunServer(t)
		_, err := nats.EnsureArchiveStream(ctx, srv.JS, nats.EventStreamOptions{})
		require.NoError(t, err)
		natstest.WaitFor(t, 15*time.Second, func() error {
			if _, err := nats.ArchiveLag(ctx, srv.JS); err == nil {
				return errors.New("the archive reports no error")
			}
			return nil
		})
		_, err = nats.ArchiveLag(ctx, srv.JS)
		require.ErrorContains(t, err, "SERP_ARCHIVE cannot copy SERP_EVENTS")
	})
	t.Run("no archive", func(t *testing.T) {
		srv := natstest.RunServer(t)
		_, err := nats.ArchiveLag(ctx, srv.JS)
		require.ErrorIs(t, err, jetstream.ErrStreamNotFound)
	})
}

// TestArchivedAuditLogReadsJobsAgainInOnePass: the audit reads the jobs
// it must check again (events after their end) in one pass over the
// archive, a partition at most once, however many they are, and leaves
// no consumer behind.
func TestArchivedAuditLogReadsJobsAgainInOnePass(t *testing.T) {
	srv, archive, es := archived(t)
	ctx := context.Background()
	through := map[string]uint64{}
	for i := range 40 {
		id := storetest.NewJobID()
		v, err := es.Append(ctx, id, 0, storetest.NewEvents(id, 1, 2)...)
		require.NoError(t, err)
		v, err = es.Append(ctx, id, v, storetest.NewEvents(id, 3, 1)...)
		require.NoError(t, err)
		if i%3 == 0 {
			through[id] = v
		}
	}
	natstest.WaitFor(t, 15*time.Second, func() error {
		if n := archive.CachedInfo().State.Msgs; n < 80 {
			_, err := archive.Info(ctx)
			return fmt.Errorf("the archive has %d of 80 messages (%v)", n, err)
		}
		return nil
	})
	log, err := nats.NewArchivedAuditLog(ctx, srv.JS, 0, nil)
	require.NoError(t, err)
	got, err := log.Jobs(ctx, through)
	require.NoError(t, err)
	require.Len(t, got, len(through))
	for id, msgs := range got {
		require.Len(t, msgs, 2, "job %s whole", id)
		require.Equal(t, through[id], msgs[1].Seq)
	}
	info, err := archive.Info(ctx)
	require.NoError(t, err)
	require.Zero(t, info.State.Consumers, "no read left its consumer")
}
