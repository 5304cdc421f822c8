package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
)

// t0 is the time of every event the suite writes.
var t0 = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

// NewJobID returns a job id no other test uses.
func NewJobID() string { return "job-" + strings.ToLower(ulid.Make().String()) }

// NewEvent returns an AttemptCreated event of a job at a version, with a
// fresh id.
func NewEvent(jobID string, version uint64) events.Event {
	return events.Event{
		ID:      ulid.Make().String(),
		JobID:   jobID,
		Version: version,
		Time:    t0,
		Data:    events.AttemptCreated{Attempt: int(version), Key: "0b8f0d9e-3c39-4d0e-9d4b-6c1a2f3e4d5c", BodySHA256: strings.Repeat("ab", 32)},
	}
}

// NewEvents returns n events of a job with versions from, from+1, ...
func NewEvents(jobID string, from uint64, n int) []events.Event {
	evs := make([]events.Event, n)
	for i := range evs {
		evs[i] = NewEvent(jobID, from+uint64(i))
	}
	return evs
}

// padded returns an ObservationStored event whose result holds pad bytes
// of filler.
func padded(jobID string, version uint64, pad int) events.Event {
	e := NewEvent(jobID, version)
	e.Data = events.ObservationStored{Key: "k", RequestID: "req", Pages: 1,
		Result: []byte(`{"pad":"` + strings.Repeat("a", pad) + `"}`)}
	return e
}

// requireJob loads a job and checks its events and version.
func requireJob(t *testing.T, s Store, jobID string, want []events.Event, version uint64) {
	t.Helper()
	got, v, err := s.Load(context.Background(), jobID)
	require.NoError(t, err)
	require.Equal(t, version, v, "version of job %s", jobID)
	if len(want) == 0 {
		require.Empty(t, got)
		return
	}
	require.Equal(t, want, got)
}

func concat(evs ...[]events.Event) []events.Event {
	var out []events.Event
	for _, e := range evs {
		out = append(out, e...)
	}
	return out
}
