package projections_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
	"github.com/stretchr/testify/require"
)

type foldSetup struct {
	jobs [][]events.Event
	recs []projections.Record
	p    projections.Projection
	// built is every value after the whole log, decoded into its type.
	built map[projections.Target][]byte
}

func setup(t *testing.T) *foldSetup { return setupLog(t, sampleLog(t)) }

func setupLog(t *testing.T, jobs [][]events.Event) *foldSetup {
	t.Helper()
	for _, j := range jobs {
		require.Empty(t, aggregate.Verify(j))
	}
	recs := interleave(jobs)
	p := projections.New(projections.Config{})
	built, err := p.Build(recs)
	require.NoError(t, err)
	return &foldSetup{jobs: jobs, recs: recs, p: p, built: built}
}

// eachLog runs a test on the sample log and on the unusual one.
func eachLog(t *testing.T, test func(t *testing.T, s *foldSetup)) {
	for _, l := range []struct {
		name string
		jobs func(*testing.T) [][]events.Event
	}{{"sample", func(t *testing.T) [][]events.Event { return sampleLog(t) }}, {"unusual", unusualLog}} {
		t.Run(l.name, func(t *testing.T) { test(t, setupLog(t, l.jobs(t))) })
	}
}

func decodeAs[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v))
	return v
}

func TestStatusEqualsViewOfFold(t *testing.T) {
	s := setup(t)
	for _, j := range s.jobs {
		id := j[0].JobID
		got := decodeAs[projections.StatusValue](t, s.built[projections.StatusTarget(id)])
		want, err := json.Marshal(projections.ViewOf(aggregate.Fold(j)))
		require.NoError(t, err)
		view, err := json.Marshal(got.JobView)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(view), "job %s", id)
		require.Equal(t, lastSeqOf(s.recs, id), got.Seq)
	}
}

func lastSeqOf(recs []projections.Record, jobID string) uint64 {
	var seq uint64
	for _, r := range recs {
		if r.Event.JobID == jobID {
			seq = r.Seq
		}
	}
	return seq
}

func TestLedgerValues(t *testing.T) {
	s := setup(t)
	jobA, jobB, jobC, jobD := s.jobs[0][0].JobID, s.jobs[1][0].JobID, s.jobs[2][0].JobID, s.jobs[3][0].JobID
	keyOf := func(j []events.Event, n int) string { return aggregate.Fold(j).Attempts[n].Key }

	tests := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"a key bought once", func(t *testing.T) {
			k := decodeAs[projections.KeyLedger](t, s.built[projections.KeyTarget(keyOf(s.jobs[0], 0))])
			require.Equal(t, jobA, k.JobID)
			require.Equal(t, 1, k.Sends)
			require.True(t, k.Accepted)
			require.Equal(t, 1, k.Pages)
			require.Equal(t, []string{"req_a"}, k.RequestIDs)
		}},
		{"a resent key whose result came as a replay", func(t *testing.T) {
			k := decodeAs[projections.KeyLedger](t, s.built[projections.KeyTarget(keyOf(s.jobs[1], 0))])
			require.Equal(t, jobB, k.JobID)
			require.Equal(t, 2, k.Sends)
			require.Equal(t, 1, k.Replays)
			require.True(t, k.Accepted)
			require.Equal(t, 2, k.Pages)
		}},
		{"a 408 key is not accepted, its successor is", func(t *testing.T) {
			old := decodeAs[projections.KeyLedger](t, s.built[projections.KeyTarget(keyOf(s.jobs[2], 0))])
			require.False(t, old.Accepted)
			require.Equal(t, string(aggregate.ClassRetryable), old.LastClass)
			next := decodeAs[projections.KeyLedger](t, s.built[projections.KeyTarget(keyOf(s.jobs[2], 1))])
			require.True(t, next.Accepted)
			require.Equal(t, "search_timeout", next.Reason)
			j := decodeAs[projections.JobLedger](t, s.built[projections.JobTarget(jobC)])
			require.Equal(t, 1, j.Purchases)
			require.Equal(t, next.Key, j.AcceptedKey)
		}},
		{"a charge without result, then a deliberate re-purchase", func(t *testing.T) {
			lost := decodeAs[projections.KeyLedger](t, s.built[projections.KeyTarget(keyOf(s.jobs[3], 0))])
			require.Equal(t, aggregate.VerdictCharged, lost.Reconciled)
			require.Len(t, lost.Charges, 1)
			j := decodeAs[projections.JobLedger](t, s.built[projections.JobTarget(jobD)])
			require.Equal(t, 2, j.Purchases)
			require.Equal(t, 1, j.RepurchasesAuthorized)
			require.Len(t, j.Keys, 2)
		}},
		{"day totals", func(t *testing.T) {
			d := decodeAs[projections.DayLedger](t, s.built[projections.DayTarget(t0)])
			// Day one: a, b (two sends), c (two sends), e, and d's send
			// and lost charge at 23:59; d's re-purchase falls on day two.
			require.Equal(t, "2026-12-02", d.Day)
			require.Equal(t, 7, d.Sends)
			require.Equal(t, 3, d.Searches)
			require.Equal(t, 1+2+0, d.Pages)
			require.Equal(t, 1, d.Replays)
			require.Equal(t, 1, d.ChargedNoResult)
			require.Equal(t, int64(1000), d.ChargedAmountMicros)
			require.Equal(t, int64(3*1000+1000), d.EstSpendMicros, "estimate: 3 pages at 1000 plus the exact charge")
			next := decodeAs[projections.DayLedger](t, s.built[projections.DayTarget(t0.Add(24*time.Hour))])
			require.Equal(t, 1, next.Repurchases)
			require.Equal(t, 1, next.Searches)
			require.Equal(t, 1, next.Sends)
			require.Equal(t, int64(1000), next.EstSpendMicros)
		}},
		{"observations of finished jobs only", func(t *testing.T) {
			o := decodeAs[projections.Observation](t, s.built[projections.ObservationTarget(jobB)])
			require.Equal(t, "req_b", o.RequestID)
			require.True(t, o.Replayed)
			require.JSONEq(t, string(result("req_b", 2)), string(o.Result))
			require.NotContains(t, s.built, projections.ObservationTarget(s.jobs[4][0].JobID), "a failed job has none")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.check)
	}
}

// TestFoldIsIdempotent: a record applied again, alone or within a batch
// that goes on past it, changes nothing; applying a batch at once or one
// record at a time gives the same bytes, on the sample log and on one
// with deadlines, a reconciliation, a 429 and a cancellation.
func TestFoldIsIdempotent(t *testing.T) { eachLog(t, foldIsIdempotent) }

func foldIsIdempotent(t *testing.T, s *foldSetup) {
	targets, byTarget := projections.Group(s.recs)
	for _, tg := range targets {
		recs := byTarget[tg]
		var oneByOne []byte
		for _, r := range recs {
			next, changed, err := s.p.Fold(tg, oneByOne, []projections.Record{r})
			require.NoError(t, err)
			require.True(t, changed)
			again, changed, err := s.p.Fold(tg, next, []projections.Record{r})
			require.NoError(t, err)
			require.False(t, changed, "%s: seq %d applied twice", tg, r.Seq)
			require.Equal(t, next, again)
			oneByOne = next
		}
		require.Equal(t, string(s.built[tg]), string(oneByOne), "%s", tg)

		half := recs[:len(recs)/2]
		mid, _, err := s.p.Fold(tg, nil, half)
		require.NoError(t, err)
		redelivered, _, err := s.p.Fold(tg, mid, recs) // from the start again
		require.NoError(t, err)
		require.Equal(t, string(s.built[tg]), string(redelivered), "%s after a redelivery", tg)
	}
}

func TestFoldRefusesUnreadableValues(t *testing.T) {
	s := setup(t)
	_, _, err := s.p.Fold(projections.StatusTarget("x"), []byte("{not json"), s.recs[:1])
	require.ErrorContains(t, err, "unreadable")
	_, _, err = s.p.Fold(projections.Target{Bucket: "other", Key: "x"}, nil, s.recs[:1])
	require.Error(t, err)
}

func TestTargets(t *testing.T) {
	tests := []struct {
		name string
		data events.Payload
		want []projections.Target
	}{
		{"scheduled", events.JobScheduled{}, []projections.Target{projections.StatusTarget("j")}},
		{"sent", events.Sent{Key: "k"}, []projections.Target{projections.StatusTarget("j"),
			projections.KeyTarget("k"), projections.JobTarget("j"), projections.DayTarget(t0)}},
		{"stored", events.ObservationStored{Key: "k"}, []projections.Target{projections.StatusTarget("j"),
			projections.ObservationTarget("j"), projections.KeyTarget("k"), projections.JobTarget("j"), projections.DayTarget(t0)}},
		{"a key no bucket can hold", events.AttemptCreated{Key: "a b"}, []projections.Target{projections.StatusTarget("j"),
			projections.JobTarget("j")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := projections.Targets(events.Event{JobID: "j", Time: t0, Data: tt.data})
			require.Equal(t, tt.want, got)
		})
	}
}

// TestUnbornValuesDoNotExistBefore: whichever way the log is cut into
// batches, a value Unborn names for a batch has no value in the fold of
// the log before it; the values of the jobs a batch begins are named, and
// so are the job and key ledgers it begins (a batch that starts after a
// job's JobScheduled, or with a KeyRotated, need not read them).
func TestUnbornValuesDoNotExistBefore(t *testing.T) { eachLog(t, unbornValuesDoNotExistBefore) }

func unbornValuesDoNotExistBefore(t *testing.T, s *foldSetup) {
	named := 0
	for from := 0; from < len(s.recs); from++ {
		before, err := s.p.Build(s.recs[:from])
		require.NoError(t, err)
		for _, size := range []int{1, 3, 10, len(s.recs)} {
			batch := s.recs[from:min(from+size, len(s.recs))]
			targets, byTarget := projections.Group(batch)
			unborn := projections.Unborn(targets, byTarget)
			for tg := range unborn {
				require.NotContains(t, before, tg, "batch %d+%d names %s, which exists", from, size, tg)
				require.False(t, strings.HasPrefix(tg.Key, projections.LedgerDayPrefix), "a day ledger is shared")
			}
			for _, r := range batch {
				switch d := r.Event.Data.(type) {
				case events.JobScheduled:
					require.True(t, unborn[projections.StatusTarget(r.Event.JobID)], "the status of a job the batch begins")
				case events.AttemptCreated:
					require.True(t, unborn[projections.JobTarget(r.Event.JobID)], "the job ledger its first key begins")
					require.True(t, unborn[projections.KeyTarget(d.Key)], "the ledger of the key it makes")
				case events.KeyRotated:
					require.True(t, unborn[projections.KeyTarget(d.NewKey)], "the ledger of the key it makes")
				}
			}
			named += len(unborn)
		}
	}
	require.Positive(t, named)
}

// groupedLog lays jobs out as the store writes them: each job's events in
// appends of up to three, an append of several events one message whose
// records share its sequence, the jobs' appends taken in turn. It also
// returns the same records each at a sequence of its own.
func groupedLog(jobs [][]events.Event) (grouped, single []projections.Record) {
	var seq uint64
	for round := 0; ; round++ {
		more := false
		for _, j := range jobs {
			from := round * 3
			if from >= len(j) {
				continue
			}
			more = true
			seq++
			for _, e := range j[from:min(from+3, len(j))] {
				grouped = append(grouped, projections.Record{Seq: seq, Event: e})
				single = append(single, projections.Record{Seq: uint64(len(single) + 1), Event: e})
			}
		}
		if !more {
			return grouped, single
		}
	}
}

// TestGroupsFoldAsTheirEvents: the events of a group share a sequence and
// are all applied, as they would be at sequences of their own; folding the
// group again changes nothing.
func TestGroupsFoldAsTheirEvents(t *testing.T) {
	eachLog(t, func(t *testing.T, s *foldSetup) {
		grouped, single := groupedLog(s.jobs)
		require.Less(t, grouped[len(grouped)-1].Seq, single[len(single)-1].Seq, "some events share a message")
		got, err := s.p.Build(grouped)
		require.NoError(t, err)
		want, err := s.p.Build(single)
		require.NoError(t, err)
		require.Len(t, got, len(want))
		withoutSeq := func(b []byte) map[string]any {
			m := decodeAs[map[string]any](t, b)
			delete(m, "seq")
			return m
		}
		targets, byTarget := projections.Group(grouped)
		for _, target := range targets {
			require.Equal(t, withoutSeq(want[target]), withoutSeq(got[target]), "%s", target)
			next, changed, err := s.p.Fold(target, got[target], byTarget[target])
			require.NoError(t, err)
			require.False(t, changed, "%s: its groups were applied", target)
			require.Equal(t, got[target], next)
		}
	})
}
