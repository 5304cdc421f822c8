package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/serpent-engine/serpent/eventstore"
	"github.com/serpent-engine/serpent/eventstore/memstore"
	"github.com/serpent-engine/serpent/eventstore/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return memstore.New(memstore.Options{}) })
}

// clock is a settable clock for the duplicate window.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func setup(t *testing.T, opts memstore.Options) (*memstore.Store, *clock) {
	t.Helper()
	c := &clock{now: time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)}
	if opts.Now == nil {
		opts.Now = c.Now
	}
	return memstore.New(opts), c
}

func TestDuplicateWindow(t *testing.T) {
	s, c := setup(t, memstore.Options{})
	ctx := context.Background()
	job := storetest.NewJobID()
	evs := storetest.NewEvents(job, 1, 1)
	v, err := s.Append(ctx, job, 0, evs...)
	require.NoError(t, err)

	again := evs[0]
	again.Version = 2
	_, err = s.Append(ctx, job, v, again)
	require.ErrorIs(t, err, eventstore.ErrDuplicate)

	// Past the window JetStream forgets the id, and so does the fake.
	c.now = c.now.Add(memstore.DefaultDuplicateWindow)
	_, err = s.Append(ctx, job, v, again)
	require.NoError(t, err)
}

func TestHooks(t *testing.T) {
	lost := errors.Join(eventstore.ErrUnknownOutcome, errors.New("reply lost"))
	tests := []struct {
		name      string
		hooks     memstore.Hooks
		wantErr   error
		wantWrite bool
	}{
		{"before fails, nothing written", memstore.Hooks{BeforeAppend: func(string) error { return lost }}, lost, false},
		{"after fails, the write landed", memstore.Hooks{AfterAppend: func(string) error { return lost }}, lost, true},
		{"hooks pass", memstore.Hooks{BeforeAppend: func(string) error { return nil }, AfterAppend: func(string) error { return nil }}, nil, true},
	}
	for _, tt := range tests {
		for _, many := range []bool{false, true} {
			name := tt.name
			if many {
				name += " (group commit)"
			}
			t.Run(name, func(t *testing.T) {
				s, _ := setup(t, memstore.Options{Hooks: tt.hooks})
				ctx := context.Background()
				job := storetest.NewJobID()
				evs := storetest.NewEvents(job, 1, 2)
				var err error
				if many {
					err = s.AppendMany(ctx, []eventstore.Append{{JobID: job, Events: evs}})[0].Err
				} else {
					_, err = s.Append(ctx, job, 0, evs...)
				}
				require.ErrorIs(t, err, tt.wantErr)
				got, _, err := s.Load(ctx, job)
				require.NoError(t, err)
				if tt.wantWrite {
					require.Equal(t, evs, got)
				} else {
					require.Empty(t, got)
				}
			})
		}
	}
}

// TestRetryAfterLostReply is the simulation the AfterAppend hook is for:
// the write landed, the caller did not hear so and repeats the append.
func TestRetryAfterLostReply(t *testing.T) {
	fail := true
	s, _ := setup(t, memstore.Options{Hooks: memstore.Hooks{AfterAppend: func(string) error {
		if fail {
			fail = false
			return eventstore.ErrUnknownOutcome
		}
		return nil
	}}})
	ctx := context.Background()
	job := storetest.NewJobID()
	evs := storetest.NewEvents(job, 1, 3)
	_, err := s.Append(ctx, job, 0, evs...)
	require.ErrorIs(t, err, eventstore.ErrUnknownOutcome)
	v, err := s.Append(ctx, job, 0, evs...)
	require.NoError(t, err)
	got, version, err := s.Load(ctx, job)
	require.NoError(t, err)
	require.Equal(t, evs, got)
	require.Equal(t, v, version)
}

func TestMaxBatch(t *testing.T) {
	s, _ := setup(t, memstore.Options{MaxBatch: 4})
	ctx := context.Background()
	job := storetest.NewJobID()
	_, err := s.Append(ctx, job, 0, storetest.NewEvents(job, 1, 5)...)
	require.ErrorIs(t, err, eventstore.ErrInvalid)

	var appends []eventstore.Append
	for range 5 {
		j := storetest.NewJobID()
		appends = append(appends, eventstore.Append{JobID: j, Events: storetest.NewEvents(j, 1, 3)})
	}
	for i, r := range s.AppendMany(ctx, appends) {
		require.NoError(t, r.Err, "append %d", i)
	}
	require.Equal(t, uint64(5), s.LastSequence(), "each append of three events is one message")
}
