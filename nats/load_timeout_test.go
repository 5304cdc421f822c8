package nats_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/eventstore/storetest"
	"github.com/serpent-engine/serpent/nats"
)

// TestLoadExpiredDeadlineIsNotAnEmptyJob: a Load whose context's
// deadline has passed cannot have read the job; it must say so, as the
// in-memory store does, not report a job without events.
func TestLoadExpiredDeadlineIsNotAnEmptyJob(t *testing.T) {
	_, es := setup(t)
	job := storetest.NewJobID()
	want, err := es.Append(context.Background(), job, 0, storetest.NewEvents(job, 1, 3)...)
	require.NoError(t, err)

	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	evs, v, err := es.Load(ctx, job)
	require.Error(t, err, "Load read %d events at version %d of a job at version %d, and said nothing", len(evs), v, want)
}

// TestLoadSlowPageIsNotTheEnd: a job of three messages loaded two
// at a time; the server answers the first page and is slower than the
// client's request timeout on the second. Load must fail, not return the
// first page as the whole job. No deadline is set by the caller.
func TestLoadSlowPageIsNotTheEnd(t *testing.T) {
	srv, _ := setup(t)
	ctx := context.Background()

	// A relay in front of the JetStream API that forwards everything,
	// except that it never answers the second direct get (a server busy
	// past the client's timeout).
	relay, err := natsgo.Connect(srv.URL)
	require.NoError(t, err)
	defer relay.Close()
	var directGets atomic.Int32
	_, err = relay.Subscribe("relay.API.>", func(m *natsgo.Msg) {
		rest := strings.TrimPrefix(m.Subject, "relay.API.")
		if strings.HasPrefix(rest, "DIRECT.GET.") && directGets.Add(1) >= 2 {
			return // swallowed: the answer comes after the client gave up
		}
		inbox := relay.NewRespInbox()
		reply := m.Reply
		if _, err := relay.Subscribe(inbox, func(r *natsgo.Msg) {
			out := natsgo.NewMsg(reply)
			out.Header, out.Data = r.Header, r.Data
			_ = relay.PublishMsg(out)
		}); err != nil {
			return
		}
		req := natsgo.NewMsg("$JS.API." + rest)
		req.Reply, req.Header, req.Data = inbox, m.Header, m.Data
		_ = relay.PublishMsg(req)
	})
	require.NoError(t, err)
	require.NoError(t, relay.Flush())

	nc, err := natsgo.Connect(srv.URL, natsgo.Timeout(500*time.Millisecond))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.NewWithAPIPrefix(nc, "relay.API")
	require.NoError(t, err)
	es, err := nats.NewEventStore(ctx, js, nats.EventStoreOptions{LoadBatch: 2})
	require.NoError(t, err)

	// Written straight to the server: three messages of one job.
	direct, err := nats.NewEventStore(ctx, srv.JS, nats.EventStoreOptions{})
	require.NoError(t, err)
	job := storetest.NewJobID()
	var v uint64
	for i := range 3 {
		v, err = direct.Append(ctx, job, v, storetest.NewEvents(job, uint64(i+1), 1)...)
		require.NoError(t, err)
	}

	evs, got, err := es.Load(ctx, job)
	require.Error(t, err, "Load returned %d of 3 events, version %d of %d, as the whole job", len(evs), got, v)
}
