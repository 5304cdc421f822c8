package audit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// recording is a log held in memory.
type recording []audit.Message

func (r recording) Read(_ context.Context, emit func([]audit.Message) error) error {
	for start := 0; start < len(r); start += 3 {
		if err := emit(r[start:min(start+3, len(r))]); err != nil {
			return err
		}
	}
	return nil
}

func (r recording) Jobs(_ context.Context, through map[string]uint64) (map[string][]audit.Message, error) {
	out := map[string][]audit.Message{}
	for _, m := range r {
		if _, ok := through[m.JobID]; ok {
			out[m.JobID] = append(out[m.JobID], m)
		}
	}
	return out, nil
}

// TestCheckLog: a log in which a job has events after it finished (an
// authorised re-purchase, read again whole), and a message that is no
// event, gives the report a plain audit of the same histories gives, and
// the message as a finding.
func TestCheckLog(t *testing.T) {
	jobs := projectionstest.SampleLog(t)
	opts := audit.Options{Now: projectionstest.T0.Add(26 * time.Hour)}
	plain := audit.New(opts)
	for _, h := range jobs {
		plain.Add(audit.CheckJob(h, opts), len(h))
	}
	want := plain.Report()

	var rec recording
	for _, r := range projectionstest.Interleave(jobs) {
		rec = append(rec, audit.Message{Seq: r.Seq, JobID: r.Event.JobID, Events: []events.Event{r.Event}})
	}
	for _, workers := range []int{1, 3} {
		opts.Workers = workers
		a, err := audit.CheckLog(context.Background(), rec, opts)
		require.NoError(t, err)
		require.Equal(t, want, a.Report(), "%d workers", workers)
	}

	junk := append(rec, audit.Message{Seq: uint64(len(rec) + 1), JobID: jobs[0][0].JobID, Err: errors.New("not an event")})
	a, err := audit.CheckLog(context.Background(), junk, opts)
	require.NoError(t, err)
	got := a.Report()
	require.Len(t, got.Violations, 1)
	require.Equal(t, audit.RuleReadable, got.Violations[0].Rule)
	require.EqualValues(t, len(junk), got.Violations[0].Seq)
}
