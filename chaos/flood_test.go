package chaos_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/chaos"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// TestMalformedFlood publishes malformed commands as fast as JetStream
// takes them, with good ones spread among them, to an engine on a real
// server. Every malformed one gets exactly one rejection record with its
// reason and payload (promise 7); the good ones all become jobs and finish,
// and are not pushed behind the flood: a rejection costs the intake a
// durable write, as a new job does, so the flood takes its time, but the
// good commands are taken in turn as it drains. That is checked by order,
// not by time: when a good command became its job, about as many
// rejections were recorded as malformed commands were published before it
// (behind the flood, it would be all of them).
func TestMalformedFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes thousands of commands")
	}
	srv := natstest.RunServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := snats.EnsureEventStream(ctx, srv.JS, snats.EventStreamOptions{})
	require.NoError(t, err)
	require.NoError(t, snats.EnsureEngineStreams(ctx, srv.JS, snats.StreamOptions{}, 5*time.Second))
	sb := sandbox.New(sandbox.Config{Seed: 9, SearchTime: 5 * time.Millisecond})
	url, err := sb.Start("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = sb.Close() })
	startEngine(t, srv.JS, nil, url, "flood")
	st, err := snats.NewEventStore(ctx, srv.JS, snats.EventStoreOptions{})
	require.NoError(t, err)

	const good, bad = 100, 3000
	quiet := publishMix(t, srv.JS, "quiet", good, 0)
	calm := waitJobs(t, st, quiet)
	begin := time.Now()
	loud := publishMix(t, srv.JS, "loud", good, bad)
	flooded := waitJobs(t, st, loud)

	// Every malformed command has one rejection, with the reason it was
	// written for and its payload byte for byte.
	reasonOf := map[string]string{}
	for _, b := range floodBad {
		reasonOf[b.payload] = b.reason
	}
	cmds, err := srv.JS.Stream(ctx, snats.CommandStream)
	require.NoError(t, err)
	natstest.WaitFor(t, time.Minute, func() error {
		rej, err := srv.JS.Stream(ctx, snats.RejectStream)
		if err != nil {
			return err
		}
		if n := rej.CachedInfo().State.Msgs; n < bad {
			return fmt.Errorf("%d of %d rejections recorded", n, bad)
		}
		return nil
	})
	drain := time.Since(begin)
	t.Logf("good jobs from publish to finished, median/max: %s/%s alone; %s/%s among %d malformed commands, which took %s to reject (%.0f a second)",
		calm.median, calm.max, flooded.median, flooded.max, bad, drain.Round(time.Millisecond), float64(bad)/drain.Seconds())
	rej, err := srv.JS.Stream(ctx, snats.RejectStream)
	require.NoError(t, err)
	require.EqualValues(t, bad, rej.CachedInfo().State.Msgs, "one rejection per malformed command")
	seen := map[uint64]bool{}
	var rejectedAt []time.Time
	for seq := uint64(1); seq <= bad; seq++ {
		m, err := rej.GetMsg(ctx, seq)
		require.NoError(t, err)
		cs, err := strconv.ParseUint(m.Header.Get(snats.HeaderCommandSeq), 10, 64)
		require.NoError(t, err)
		require.False(t, seen[cs], "command %d rejected twice", cs)
		seen[cs] = true
		rejectedAt = append(rejectedAt, m.Time)
		cmd, err := cmds.GetMsg(ctx, cs)
		require.NoError(t, err)
		require.Equal(t, cmd.Data, m.Data)
		require.Empty(t, chaos.JobOf(cmd.Data))
		require.Equal(t, reasonOf[string(cmd.Data)], m.Header.Get(snats.HeaderRejectReason), "%s", cmd.Data)
		require.NotEmpty(t, m.Header.Get(snats.HeaderRejectError))
	}

	// Taken in turn: for each good command, the rejections recorded by
	// the time its job began, less the malformed commands published
	// before it. Behind the flood the median would be about bad/2.
	slices.SortFunc(rejectedAt, func(a, b time.Time) int { return a.Compare(b) })
	var ahead []int
	last := cmds.CachedInfo().State.LastSeq
	for seq := uint64(1); seq <= last; seq++ {
		cmd, err := cmds.GetMsg(ctx, seq)
		require.NoError(t, err)
		job := chaos.JobOf(cmd.Data)
		if _, isLoud := loud[job]; !isLoud {
			continue
		}
		evs, _, err := st.Load(ctx, job)
		require.NoError(t, err)
		began := evs[0].Time
		recorded, _ := slices.BinarySearchFunc(rejectedAt, began, func(a, b time.Time) int { return a.Compare(b) })
		before := 0
		for cs := range seen {
			if cs < seq {
				before++
			}
		}
		ahead = append(ahead, recorded-before)
	}
	slices.Sort(ahead)
	require.Len(t, ahead, good)
	t.Logf("rejections recorded beyond those of earlier commands when a good job began: median %d, max %d (behind the flood: about %d)",
		ahead[good/2], ahead[good-1], bad/2)
	require.Less(t, ahead[good/2], bad/4, "the good commands waited behind the flood")
}

// publishMix publishes good valid commands (due now) with bad malformed
// ones spread evenly among them, as fast as the server acknowledges, and
// returns the good ones' jobs with their publish times.
func publishMix(t *testing.T, js jetstream.JetStream, name string, good, bad int) map[string]time.Time {
	t.Helper()
	jobs := map[string]time.Time{}
	var futures []jetstream.PubAckFuture
	every := max(1, bad/max(good, 1))
	for i, b := 0, 0; i < good || b < bad; {
		var payload string
		if b < bad && (i >= good || b < (i+1)*every) {
			payload = floodBad[b%len(floodBad)].payload
			b++
		} else {
			payload = fmt.Sprintf(`{"slot":"2026-01-01T00:00:00Z","query":"%s %d","country":"US","language":"en","device":"mobile"}`, name, i)
			jobs[chaos.JobOf([]byte(payload))] = time.Now()
			i++
		}
		f, err := js.PublishAsync(snats.ScheduleSubject, []byte(payload))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	for _, f := range futures {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatalf("publish: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("publish not acknowledged in 30 s")
		}
	}
	return jobs
}

// floodBad are the flood's malformed commands, each with the reason it
// was written to be refused for.
var floodBad = []struct{ payload, reason string }{
	{`{"slot":"soon","query":"q","country":"US","language":"en","device":"mobile"}`, "invalid_slot"},
	{`{"slot":"2026-12-02T14:00:00Z","query":"q","country":"US","language":"en","device":"mobile","colour":"red"}`, engine.ReasonMalformed},
	{`not json at all`, engine.ReasonMalformed},
}

type latency struct{ median, max time.Duration }

// waitJobs waits until every job is finished and returns how long each
// took from its publish.
func waitJobs(t *testing.T, st *snats.EventStore, jobs map[string]time.Time) latency {
	t.Helper()
	took := map[string]time.Duration{}
	natstest.WaitFor(t, 2*time.Minute, func() error {
		for j, at := range jobs {
			if _, ok := took[j]; ok {
				continue
			}
			evs, _, err := st.Load(context.Background(), j)
			if err != nil {
				return err
			}
			if s := aggregate.Fold(evs); s.Status.Terminal() {
				took[j] = time.Since(at)
			}
		}
		if len(took) < len(jobs) {
			return fmt.Errorf("%d of %d jobs finished", len(took), len(jobs))
		}
		return nil
	})
	var all []time.Duration
	for _, d := range took {
		all = append(all, d)
	}
	slices.Sort(all)
	return latency{median: all[len(all)/2].Round(time.Millisecond), max: all[len(all)-1].Round(time.Millisecond)}
}
