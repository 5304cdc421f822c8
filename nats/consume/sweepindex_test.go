package consume_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// TestSweepReadsTheIndex: a sweep learns which jobs have a timer from the
// work stream's index of subjects, and looks up one by one only the jobs
// it does not find there.
func TestSweepReadsTheIndex(t *testing.T) {
	l := setupLive(t, sandbox.Faults{})
	eng := l.engine("w", engine.Hooks{})
	ctx := context.Background()
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	var ids []string
	for i := range 50 {
		out, err := eng.Schedule(ctx, []byte(fmt.Sprintf(`{"slot":%q,"query":"armed %d","country":"US","language":"en","device":"mobile"}`, future, i)), "test")
		require.NoError(t, err)
		ids = append(ids, out.JobID)
	}
	lost := ids[17]
	work, err := l.srv.JS.Stream(ctx, snats.WorkStream)
	require.NoError(t, err)
	require.NoError(t, work.Purge(ctx, jetstream.WithPurgeSubject(snats.TimerSubjectPrefix+lost)))

	// Every look-up of a job's timer or due message is a direct get on
	// the work stream; a subscriber sees each request.
	var (
		mu     sync.Mutex
		lookUp = map[string]int{}
	)
	sub, err := l.srv.Conn.Subscribe("$JS.API.DIRECT.GET."+snats.WorkStream+".>", func(m *natsgo.Msg) {
		mu.Lock()
		defer mu.Unlock()
		s := strings.TrimPrefix(m.Subject, "$JS.API.DIRECT.GET."+snats.WorkStream+".")
		lookUp[s[strings.LastIndexByte(s, '.')+1:]]++
	})
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, l.srv.Conn.Flush())

	rep, err := eng.SweepJobs(ctx, snats.NewTimers(l.srv.JS, nil), engine.JobsOf(ids))
	require.NoError(t, err)
	require.Equal(t, engine.SweepReport{Jobs: 50, Live: 50, Rearmed: 1}, rep)
	_, err = work.GetLastMsgForSubject(ctx, snats.TimerSubjectPrefix+lost)
	require.NoError(t, err, "armed again")
	// The sweep's requests went out on this connection before this one,
	// so the subscriber has seen them all once it sees this one.
	_, err = work.GetLastMsgForSubject(ctx, snats.TimerSubjectPrefix+"end")
	require.ErrorIs(t, err, jetstream.ErrMsgNotFound)
	natstest.WaitFor(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if lookUp["end"] == 0 {
			return errors.New("the last look-up not seen yet")
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	delete(lookUp, "end")
	require.Equal(t, []string{lost}, slices.Collect(maps.Keys(lookUp)), "only the job the index lacks is looked up")
}
