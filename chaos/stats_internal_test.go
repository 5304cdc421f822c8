package chaos

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// TestBooksReadOnceNoSearchRuns: a search its client gave up on runs on at
// the sandbox and is charged when it ends. The run's books are read once
// no search runs there: a read at once (as the checks did) shows no charge
// for it, quietStats shows the charge.
func TestBooksReadOnceNoSearchRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sb := sandbox.New(sandbox.Config{Seed: 1, Now: time.Now, SearchTime: 30 * time.Second,
			Logger: slog.New(slog.DiscardHandler)})
		defer sb.Close()
		body, err := aggregate.Body(events.SearchContext{Query: "espresso scale", Country: "US", Language: "en", Device: "mobile", Limit: 10})
		require.NoError(t, err)
		ctx, giveUp := context.WithCancel(context.Background())
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/search", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+sandbox.DefaultToken)
		req.Header.Set("Idempotency-Key", uuid.NewString())
		req.Header.Set("Content-Type", "application/json")
		answered := make(chan struct{})
		go func() { defer close(answered); sb.ServeHTTP(httptest.NewRecorder(), req) }()
		synctest.Wait()
		giveUp()
		<-answered

		read := func(context.Context) (sandbox.Stats, error) { return sb.Stats(), nil }
		at, _ := read(context.Background())
		require.Equal(t, 1, at.Running)
		require.Zero(t, at.Charges, "a read at once misses the charge to come")

		st, quiet, err := quietStats(context.Background(), read, 100*time.Millisecond, time.Minute)
		require.NoError(t, err)
		require.True(t, quiet)
		require.Zero(t, st.Running)
		require.Equal(t, 1, st.Charges)
	})
}

// TestQuietStatsBounded: stats that never quiet down are returned, not
// quiet, once the bound has passed; a failed read is the error.
func TestQuietStatsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reads := 0
		running := func(context.Context) (sandbox.Stats, error) { reads++; return sandbox.Stats{Running: 1}, nil }
		st, quiet, err := quietStats(context.Background(), running, time.Second, 10*time.Second)
		require.NoError(t, err)
		require.False(t, quiet)
		require.Equal(t, 1, st.Running)
		require.Greater(t, reads, 1, "it read again until the bound")

		boom := errors.New("boom")
		_, quiet, err = quietStats(context.Background(), func(context.Context) (sandbox.Stats, error) { return sandbox.Stats{}, boom }, time.Second, time.Minute)
		require.ErrorIs(t, err, boom)
		require.False(t, quiet)
	})
}
