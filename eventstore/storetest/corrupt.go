package storetest

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/eventstore"
)

// testCorrupt puts unreadable messages on a job's subject: Load names the
// job and the sequence, and does not panic.
func testCorrupt(t *testing.T, s Store) {
	raw, ok := s.(RawWriter)
	require.True(t, ok, "the store must implement storetest.RawWriter")
	ctx := context.Background()

	otherJob, err := events.Encode(NewEvent(NewJobID(), 1))
	require.NoError(t, err)
	tests := []struct {
		name string
		data []byte
	}{
		{"garbage", []byte("\x00not an event{")},
		{"empty", nil},
		{"unknown type", []byte(`{"type":"Melted","schema":1}`)},
		{"event of another job", otherJob},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := NewJobID()
			v, err := s.Append(ctx, job, 0, NewEvents(job, 1, 1)...)
			require.NoError(t, err)
			seq, err := raw.WriteRaw(ctx, job, tt.data)
			require.NoError(t, err)
			require.Greater(t, seq, v)

			_, _, err = s.Load(ctx, job)
			var ce *eventstore.CorruptError
			require.True(t, errors.As(err, &ce), "want a *eventstore.CorruptError, got %v", err)
			require.Equal(t, job, ce.JobID)
			require.Equal(t, seq, ce.Seq)
			require.ErrorContains(t, err, job)
			require.ErrorContains(t, err, strconv.FormatUint(seq, 10))
		})
	}
}
