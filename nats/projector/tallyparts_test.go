package projector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/nats/projector"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// partsLog is a log of jobs left in flight, a bucket for checkpoints, and
// what a test of checkpoints in parts does with them.
type partsLog struct {
	t    *testing.T
	srv  *natstest.Server
	st   *snats.EventStore
	kv   jetstream.KeyValue
	ids  *projectionstest.IDs
	n    int
	last uint64
	log  time.Time
}

func newPartsLog(t *testing.T) *partsLog {
	srv, st := eventLog(t)
	kv, err := srv.JS.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: snats.MetricsBucket, History: 1})
	require.NoError(t, err)
	return &partsLog{t: t, srv: srv, st: st, kv: kv, ids: projectionstest.IDsFrom(0)}
}

// write appends n jobs that stay in flight.
func (p *partsLog) write(n int) {
	for range n {
		j := projectionstest.NewJob(p.t, p.ids, fmt.Sprintf("kettle %d", p.n), projectionstest.T0)
		j.Send()
		v, err := p.st.Append(p.t.Context(), j.S.JobID, 0, j.Log...)
		require.NoError(p.t, err)
		p.last, p.n = v, p.n+1
	}
}

// tally is a tally that has counted the whole log.
func (p *partsLog) tally() *projections.Tally {
	tl := projections.NewTally().ForgetFinished()
	st, err := p.srv.JS.Stream(p.t.Context(), snats.EventStream)
	require.NoError(p.t, err)
	p.log = st.CachedInfo().Created
	ctx, cancel := context.WithCancel(p.t.Context())
	done := make(chan struct{})
	go func() { defer close(done); projector.FollowTally(ctx, p.srv.JS, tl, nil) }()
	natstest.WaitFor(p.t, 10*time.Second, func() error {
		if tl.Seq() != p.last {
			return fmt.Errorf("counted up to %d of %d", tl.Seq(), p.last)
		}
		return nil
	})
	cancel()
	<-done
	return tl
}

// save writes tl's checkpoint, and requires it written.
func (p *partsLog) save(tl *projections.Tally, msgAndArgs ...any) {
	p.t.Helper()
	saved, err := projector.SaveTallyCheckpoint(p.t.Context(), p.srv.JS, tl, p.log)
	require.NoError(p.t, err, msgAndArgs...)
	require.True(p.t, saved, msgAndArgs...)
}

// head is the checkpoint's head in the bucket.
func (p *partsLog) head() (h struct {
	Seq   uint64 `json:"seq"`
	Parts *struct {
		ID string `json:"id"`
		N  int    `json:"n"`
	} `json:"parts"`
}) {
	e, err := p.kv.Get(p.t.Context(), snats.MetricsCheckpointKey)
	require.NoError(p.t, err)
	require.NoError(p.t, json.Unmarshal(e.Value(), &h))
	return h
}

// parts lists the keys of checkpoint parts in the bucket's stream.
func (p *partsLog) parts() []string {
	st, err := p.srv.JS.Stream(p.t.Context(), "KV_"+snats.MetricsBucket)
	require.NoError(p.t, err)
	prefix := "$KV." + snats.MetricsBucket + "."
	info, err := st.Info(p.t.Context(), jetstream.WithSubjectFilter(prefix+snats.MetricsCheckpointKey+".>"))
	require.NoError(p.t, err)
	var keys []string
	for s := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(s, prefix))
	}
	sort.Strings(keys)
	return keys
}

// resume is a fresh tally resumed from the checkpoint, and where from.
func (p *partsLog) resume() (*projections.Tally, uint64, error) {
	tl := projections.NewTally().ForgetFinished()
	seq, _, err := projector.ResumeTally(p.t.Context(), p.srv.JS, tl)
	return tl, seq, err
}

// A checkpoint larger than a part is written in parts, head last, and
// read back whole; the parts of the checkpoints it replaced are purged,
// those of one further along left for the engine writing it.
func TestTallyCheckpointInParts(t *testing.T) {
	projector.SetPartSize(t, 200)
	p := newPartsLog(t)
	ctx := t.Context()
	p.write(30)
	first := p.tally()
	p.save(first)
	h := p.head()
	require.Equal(t, p.last, h.Seq)
	require.NotNil(t, h.Parts, "a checkpoint of 30 jobs in flight is more than 200 bytes")
	require.Greater(t, h.Parts.N, 3)
	require.Len(t, p.parts(), h.Parts.N)

	got, seq, err := p.resume()
	require.NoError(t, err)
	require.Equal(t, p.last, seq)
	want := first.Counts()
	want.CaughtUp = false
	require.Equal(t, want, got.Counts())
	require.Equal(t, 30, got.Remembered())

	// Parts of an engine that died before its head, behind the head, and
	// of a log made before this one, past its end, are purged at the next
	// save; those of a tally further along than the head but within the
	// log are left for the engine that may be writing them.
	_, err = p.kv.Put(ctx, fmt.Sprintf("%s.1.0a0b0c0d.0", snats.MetricsCheckpointKey), []byte("torn"))
	require.NoError(t, err)
	_, err = p.kv.Put(ctx, fmt.Sprintf("%s.%d.0a0b0c0d.0", snats.MetricsCheckpointKey, p.last+1000), []byte("of another log"))
	require.NoError(t, err)
	p.write(10)
	second, at := p.tally(), p.last
	p.write(1)
	ahead := fmt.Sprintf("%s.%d.0e0e0e0e.0", snats.MetricsCheckpointKey, p.last)
	_, err = p.kv.Put(ctx, ahead, []byte("being written"))
	require.NoError(t, err)
	p.save(second)
	h = p.head()
	require.Equal(t, at, h.Seq)
	var wantKeys []string
	for i := range h.Parts.N {
		wantKeys = append(wantKeys, fmt.Sprintf("%s.%s.%d", snats.MetricsCheckpointKey, h.Parts.ID, i))
	}
	wantKeys = append(wantKeys, ahead)
	sort.Strings(wantKeys)
	require.Equal(t, wantKeys, p.parts(), "the first checkpoint's parts, the torn one's and the other log's purged")
	got, seq, err = p.resume()
	require.NoError(t, err)
	require.Equal(t, at, seq)
	require.Equal(t, 40, got.Remembered())

	// A tally small enough for one value writes its whole checkpoint in
	// the head again, and the parts behind it go.
	projector.SetPartSize(t, 1<<20)
	p.write(1)
	third := p.tally()
	p.save(third)
	require.Nil(t, p.head().Parts)
	require.Empty(t, p.parts(), "the second checkpoint's parts and those now behind the head purged")
	got, seq, err = p.resume()
	require.NoError(t, err)
	require.Equal(t, p.last, seq)
	require.Equal(t, 42, got.Remembered())
}

// A checkpoint whose parts are not all there, or not those its head
// names, is refused whole: the engine counts the log from its start, as
// without one. Its head is deleted, so that the next save, even of a
// tally no further along, writes a good one.
func TestTallyCheckpointPartsDamaged(t *testing.T) {
	projector.SetPartSize(t, 200)
	p := newPartsLog(t)
	ctx := t.Context()
	p.write(20)
	tally := p.tally()
	for _, c := range []struct {
		name, why string
		damage    func(key func(i int) string, n int)
	}{
		{"a part damaged", "not the", func(key func(int) string, _ int) {
			e, err := p.kv.Get(ctx, key(1))
			require.NoError(t, err)
			damaged := []byte(strings.ToUpper(string(e.Value())))
			require.NotEqual(t, e.Value(), damaged)
			_, err = p.kv.Put(ctx, key(1), damaged)
			require.NoError(t, err)
		}},
		{"a part missing", "missing", func(key func(int) string, n int) {
			require.NoError(t, p.kv.Purge(ctx, key(n-1)))
		}},
	} {
		p.save(tally, c.name)
		h := p.head()
		require.NotNil(t, h.Parts, c.name)
		c.damage(func(i int) string { return fmt.Sprintf("%s.%s.%d", snats.MetricsCheckpointKey, h.Parts.ID, i) }, h.Parts.N)

		tl, seq, err := p.resume()
		require.ErrorIs(t, err, projections.ErrTallyCheckpoint, c.name)
		require.ErrorContains(t, err, c.why, c.name)
		require.Zero(t, seq, c.name)
		require.Zero(t, tl.Seq(), c.name)
		require.Zero(t, tl.Remembered(), c.name)
		_, err = p.kv.Get(ctx, snats.MetricsCheckpointKey)
		require.ErrorIs(t, err, jetstream.ErrKeyNotFound, c.name)
	}
	p.save(tally)
	_, seq, err := p.resume()
	require.NoError(t, err)
	require.Equal(t, p.last, seq)
	h := p.head()
	require.Len(t, p.parts(), h.Parts.N, "the damaged checkpoints' parts are purged")
}

// Engines saving at once, each in parts: the head is the furthest
// along's, its parts are whole, and the next save leaves only its own.
func TestTallyCheckpointPartsRace(t *testing.T) {
	projector.SetPartSize(t, 200)
	p := newPartsLog(t)
	ctx := t.Context()
	var tallies []*projections.Tally
	// Three tallies, each further along: a save loses the head at most
	// twice, to the two behind it, and does not give up.
	for range 3 {
		p.write(8)
		tallies = append(tallies, p.tally())
	}
	var wg sync.WaitGroup
	for _, tl := range tallies {
		for range 4 {
			wg.Go(func() {
				_, err := projector.SaveTallyCheckpoint(ctx, p.srv.JS, tl, p.log)
				assert.NoError(t, err)
			})
		}
	}
	wg.Wait()
	got, seq, err := p.resume()
	require.NoError(t, err)
	require.Equal(t, p.last, seq)
	require.Equal(t, 24, got.Remembered())

	p.write(1)
	p.save(p.tally())
	h := p.head()
	for _, k := range p.parts() {
		require.True(t, strings.HasPrefix(k, snats.MetricsCheckpointKey+"."+h.Parts.ID+"."), k)
	}
	require.Len(t, p.parts(), h.Parts.N)
}

// hookJS runs hook once, the first time the event stream is looked up,
// after its information is read: whoever asked goes on with a log's end
// that has moved since.
type hookJS struct {
	jetstream.JetStream
	once sync.Once
	hook func()
}

func (h *hookJS) Stream(ctx context.Context, name string) (jetstream.Stream, error) {
	st, err := h.JetStream.Stream(ctx, name)
	if name == snats.EventStream {
		h.once.Do(h.hook)
	}
	return st, err
}

// A checkpoint written while a save or a resume was under way, of a log
// that moved past the end they read, is still the log's: a save behind
// it does not write over it, and a resume takes it.
func TestTallyCheckpointPastTheEndRead(t *testing.T) {
	projector.SetPartSize(t, 200)
	p := newPartsLog(t)
	ctx := t.Context()
	p.write(10)
	behind := p.tally()
	further := func() {
		p.write(5)
		p.save(p.tally())
	}

	saved, err := projector.SaveTallyCheckpoint(ctx, &hookJS{JetStream: p.srv.JS, hook: further}, behind, p.log)
	require.NoError(t, err)
	require.False(t, saved, "the checkpoint there is further along")
	h := p.head()
	require.Equal(t, p.last, h.Seq)
	require.Len(t, p.parts(), h.Parts.N)

	tl := projections.NewTally().ForgetFinished()
	seq, _, err := projector.ResumeTally(ctx, &hookJS{JetStream: p.srv.JS, hook: further}, tl)
	require.NoError(t, err)
	require.Equal(t, p.last, seq)
	require.Equal(t, 20, tl.Remembered())
}

// timeoutKV stores an update of the head and then says it timed out, as
// a reply lost on the way back would.
type timeoutKV struct{ jetstream.KeyValue }

func (k timeoutKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	if _, err := k.KeyValue.Update(ctx, key, value, rev); err != nil {
		return 0, err
	}
	return 0, natsgo.ErrTimeout
}

type timeoutJS struct{ jetstream.JetStream }

func (j timeoutJS) KeyValue(ctx context.Context, bucket string) (jetstream.KeyValue, error) {
	kv, err := j.JetStream.KeyValue(ctx, bucket)
	return timeoutKV{kv}, err
}

// What is not a part is left alone; parts that may be another engine's
// stay while the head there is one no tally takes; the parts of a head
// whose write timed out, stored all the same, are kept.
func TestTallyCheckpointPartsKept(t *testing.T) {
	projector.SetPartSize(t, 200)
	p := newPartsLog(t)
	ctx := t.Context()
	_, err := p.kv.Put(ctx, snats.MetricsCheckpointKey+".bak", []byte("an operator's copy"))
	require.NoError(t, err)
	other := fmt.Sprintf(`{"format":1,"log":"2020-01-01T00:00:00Z","seq":1000000,"forget":true}`)
	_, err = p.kv.Put(ctx, snats.MetricsCheckpointKey, []byte(other))
	require.NoError(t, err)
	p.write(20)
	tally := p.tally()
	p.write(1)
	peer := fmt.Sprintf("%s.%d.0e0e0e0e.0", snats.MetricsCheckpointKey, p.last)
	_, err = p.kv.Put(ctx, peer, []byte("another engine's, being written"))
	require.NoError(t, err)

	p.save(tally, "over a head of another log")
	h := p.head()
	require.Contains(t, p.parts(), peer)
	require.Contains(t, p.parts(), snats.MetricsCheckpointKey+".bak")
	require.Len(t, p.parts(), h.Parts.N+2)

	saved, err := projector.SaveTallyCheckpoint(ctx, timeoutJS{p.srv.JS}, p.tally(), p.log)
	require.ErrorIs(t, err, natsgo.ErrTimeout)
	require.False(t, saved)
	got, seq, err := p.resume()
	require.NoError(t, err, "the head written is whole")
	require.Equal(t, p.last, seq)
	require.Equal(t, 21, got.Remembered())
}
