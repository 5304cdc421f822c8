package projector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// world is a JetStream server with SERP_EVENTS and the log appended so
// far, with the stream sequence of every event.
type world struct {
	t       *testing.T
	ids     *projectionstest.IDs
	srv     *natstest.Server
	store   *snats.EventStore
	recs    []projections.Record
	version map[string]uint64 // each job's last subject sequence
}

func setup(t *testing.T) *world {
	t.Helper()
	srv := natstest.RunServer(t)
	ctx := context.Background()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	st, err := snats.NewEventStore(ctx, srv.JS, snats.EventStoreOptions{})
	require.NoError(t, err)
	return &world{t: t, srv: srv, store: st, version: map[string]uint64{}, ids: projectionstest.IDsFrom(1 << 30)}
}

// append writes histories to the log, interleaved one event at a time as a
// busy engine writes them. A history may continue one appended before.
func (w *world) append(jobs [][]events.Event) {
	w.t.Helper()
	for _, r := range projectionstest.Interleave(jobs) {
		require.NoError(w.t, w.appendNow([]events.Event{r.Event}))
	}
}

// appendNow appends events one at a time, each continuing its job, and
// reports an error rather than fail the test (a hook calls it from the
// runner's goroutine).
func (w *world) appendNow(evs []events.Event) error {
	for _, e := range evs {
		v, err := w.store.Append(context.Background(), e.JobID, w.version[e.JobID], e)
		if err != nil {
			return err
		}
		w.version[e.JobID] = v
		w.recs = append(w.recs, projections.Record{Seq: v, Event: e})
	}
	return nil
}

// sample appends the sample log and returns its jobs.
func (w *world) sample() [][]events.Event {
	jobs := projectionstest.SampleLog(w.t)
	w.append(jobs)
	return jobs
}

// more appends n new jobs, each scheduled, sent and bought.
func (w *world) more(n int, tag string) {
	var jobs [][]events.Event
	for i := range n {
		j := projectionstest.NewJob(w.t, w.ids, fmt.Sprintf("%s %d", tag, i), projectionstest.T0.Add(time.Duration(i)*time.Minute))
		j.Send()
		id := fmt.Sprintf("req_%s_%d", tag, i)
		j.Reply(aggregate.Outcome{Status: 200, RequestID: id, Result: projectionstest.Result(id, 1), Pages: 1})
		jobs = append(jobs, j.Log)
	}
	w.append(jobs)
}

// runner starts a runner; it stops when the test ends or stop is called.
func (w *world) runner(name string, cfg projector.Config) (*projector.Runner, func()) {
	w.t.Helper()
	cfg.Name = name
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = time.Second
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = time.Second
	}
	r, err := projector.New(context.Background(), w.srv.JS, cfg)
	require.NoError(w.t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	w.t.Cleanup(stop)
	return r, stop
}

// caughtUp waits until the projections have applied the whole log.
func (w *world) caughtUp() {
	w.t.Helper()
	last := w.recs[len(w.recs)-1].Seq
	natstest.WaitFor(w.t, 20*time.Second, func() error {
		lag, err := projector.ReadLag(context.Background(), w.srv.JS, "", time.Now())
		if err != nil {
			return err
		}
		if lag.Applied < last || lag.Pending > 0 {
			return fmt.Errorf("applied %d of %d, %d pending", lag.Applied, last, lag.Pending)
		}
		return nil
	})
}

// contents is every value of the projection buckets (or their staging
// copies), by target.
func (w *world) contents(suffix string) map[projections.Target]string {
	w.t.Helper()
	out := map[projections.Target]string{}
	ctx := context.Background()
	for _, b := range projections.Buckets() {
		kv, err := w.srv.JS.KeyValue(ctx, b+suffix)
		require.NoError(w.t, err)
		watch, err := kv.WatchAll(ctx, jetstream.IgnoreDeletes())
		require.NoError(w.t, err)
		for e := range watch.Updates() {
			if e == nil {
				break
			}
			out[projections.Target{Bucket: b, Key: e.Key()}] = string(e.Value())
		}
		require.NoError(w.t, watch.Stop())
	}
	return out
}

// want is what the buckets must hold: a fresh fold of the whole log.
func (w *world) want() map[projections.Target]string {
	w.t.Helper()
	built, err := projections.New(projections.Config{}).Build(w.recs)
	require.NoError(w.t, err)
	out := map[projections.Target]string{}
	for t, v := range built {
		out[t] = string(v)
	}
	return out
}

// requireEqual compares two bucket contents key by key, for a readable
// failure.
func requireEqual(t *testing.T, want, got map[projections.Target]string) {
	t.Helper()
	var keys []string
	for k := range want {
		keys = append(keys, k.String())
		require.Equal(t, want[k], got[k], "value of %s", k)
	}
	for k := range got {
		_, ok := want[k]
		require.True(t, ok, "unexpected value %s", k)
	}
	sort.Strings(keys)
	require.Len(t, got, len(want))
}

var projectionsT0 = projectionstest.T0

func decodeDay(t *testing.T, v string) projections.DayLedger {
	t.Helper()
	var d projections.DayLedger
	require.NoError(t, json.Unmarshal([]byte(v), &d))
	return d
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func mustEncode(t *testing.T, e events.Event) []byte {
	t.Helper()
	b, err := events.Encode(e)
	require.NoError(t, err)
	return b
}
