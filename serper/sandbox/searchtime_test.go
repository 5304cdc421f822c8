package sandbox_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/serper/sandbox"
)

// TestSetSearchTime: searches that start after SetSearchTime run for the
// new time; a search already running keeps its own.
func TestSetSearchTime(t *testing.T) {
	e := setup(t, sandbox.Config{})
	e.srv.SetSearchTime(time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	long := make(chan reply, 1)
	go func() { long <- e.searchCtx(ctx, uuid.NewString(), espresso) }()
	require.Eventually(t, func() bool { return e.srv.Stats().Running == 1 }, 10*time.Second, 5*time.Millisecond,
		"the hour-long search runs")

	e.srv.SetSearchTime(0)
	r := e.search(uuid.NewString(), espresso)
	require.NoError(t, r.err)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	st := e.srv.Stats()
	require.Equal(t, 2, st.Executions)
	require.Equal(t, 1, st.Running, "the first search still runs for its hour")
	cancel()
	require.Error(t, (<-long).err, "its client gave up")
}
