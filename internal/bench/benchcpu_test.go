package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	snats "github.com/serpent-engine/serpent/nats"
)

// TestCPUSplitTellsThePartsApart: CPU time spent under each part's label
// is counted for that part, and an embedded server started by the engine
// leaves the engine's goroutine labelled as the engine's.
func TestCPUSplitTellsThePartsApart(t *testing.T) {
	split, err := startCPUSplit()
	require.NoError(t, err)
	defer split.abort()

	var wg sync.WaitGroup
	wg.Add(2)
	go withPart(context.Background(), partEngine, func(context.Context) {
		defer wg.Done()
		srv, err := snats.StartEmbedded(snats.EmbeddedConfig{Dir: t.TempDir(), Host: "127.0.0.1", Port: -1})
		if err != nil {
			t.Error(err)
			return
		}
		defer srv.Shutdown()
		sink.Add(spin(150_000_000))
	})
	go withPart(context.Background(), partSandbox, func(context.Context) {
		defer wg.Done()
		sink.Add(spin(150_000_000))
	})
	wg.Wait()

	parts, err := split.stop()
	require.NoError(t, err)
	require.Positive(t, parts[partEngine], "%v", parts)
	require.Positive(t, parts[partSandbox], "%v", parts)
	for part := range parts {
		require.Contains(t, cpuParts, part)
	}
	again, err := startCPUSplit()
	require.NoError(t, err, "stop ends the profile")
	again.abort()
}

func TestCPUSplitGivesWayToCPUProfile(t *testing.T) {
	split, err := startCPUSplit()
	require.NoError(t, err)
	defer split.abort()
	_, err = startCPUSplit()
	require.Error(t, err, "one CPU profile at a time")
}

// spin is CPU work, a fixed amount of it (some 0.2 s here) whatever the
// load on the machine, for the profile to sample.
func spin(n int) uint64 {
	x := uint64(1)
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

var sink atomic.Uint64
