package audit_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/audit"
)

// An audit WithoutLedger reports what one that keeps the ledger's facts
// reports, keeps none of them, and refuses a ledger join.
func TestWithoutLedger(t *testing.T) {
	s := setup(t)
	o := audit.Options{Now: s.now, WithoutLedger: true}
	a := audit.New(o)
	var jobs []audit.Job
	events := 0
	for _, h := range s.jobs {
		j := audit.CheckJob(h, o)
		require.Nil(t, j.Ledger, j.ID)
		jobs, events = append(jobs, j), events+len(h)
	}
	a.AddJobs(jobs, events)
	require.Equal(t, s.run().Report(), a.Report())
	require.Panics(t, func() { a.Lookups() })
	require.Panics(t, func() { a.Ledger(s.ledger()) })
	got, ok := a.Job(s.jobs[2][0].JobID)
	require.True(t, ok)
	require.Equal(t, s.jobs[2][0].JobID, got.ID)
}

// A job added twice, at once or apart, is counted once and reported.
func TestAddJobsTwice(t *testing.T) {
	s := setup(t)
	o := audit.Options{Now: s.now}
	first, second := audit.CheckJob(s.jobs[0], o), audit.CheckJob(s.jobs[1], o)
	a := audit.New(o)
	a.AddJobs([]audit.Job{first, second, first}, 3)
	a.Add(second, 1)
	r := a.Report()
	require.Equal(t, 2, r.Jobs)
	require.Equal(t, 4, r.Events)
	require.Equal(t, []string{aggregate.RuleOneJob, aggregate.RuleOneJob}, rules(r))
}

// The auditor writes only within the jobs it was handed, and refuses a
// ledger join over a job checked without the ledger's facts.
func TestAddJobsWithinWhatItWasGiven(t *testing.T) {
	s := setup(t)
	o := audit.Options{Now: s.now}
	all := make([]audit.Job, 0, len(s.jobs))
	for _, h := range s.jobs {
		all = append(all, audit.CheckJob(h, o))
	}
	a := audit.New(o)
	a.AddJobs(all[:2], 2)
	a.Add(all[len(all)-1], 1)
	a.AddJobs(all[2:len(all)-1], len(all)-3)
	r := a.Report()
	require.Equal(t, len(s.jobs), r.Jobs)
	require.Equal(t, s.run().Report().Statuses, r.Statuses)

	bare := audit.CheckJob(s.jobs[0], audit.Options{Now: s.now, WithoutLedger: true})
	mixed := audit.New(o)
	mixed.Add(all[1], 1)
	mixed.Add(bare, 1)
	require.PanicsWithValue(t, "audit: the billing ledger joined to job "+bare.ID+", checked WithoutLedger", func() { mixed.Lookups() })
}
