package projections

import (
	"strings"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// The KV buckets the projections live in. Their names, keys and value
// formats are public: dashboards and the nats CLI read them directly
// (docs/auditors.md).
const (
	// StatusBucket holds one StatusValue per job, under the job id.
	StatusBucket = "serp_status"
	// LedgerBucket holds what was bought: a KeyLedger per attempt key
	// (key.<key>), a JobLedger per job (job.<job_id>) and a DayLedger per
	// UTC day (day.<YYYY-MM-DD>).
	LedgerBucket = "serp_ledger"
	// ObservationsBucket holds one Observation per job that has a result,
	// under the job id.
	ObservationsBucket = "serp_observations"
)

// Buckets lists the projection buckets.
func Buckets() []string { return []string{StatusBucket, LedgerBucket, ObservationsBucket} }

// Key prefixes in the ledger bucket.
const (
	LedgerKeyPrefix = "key."
	LedgerJobPrefix = "job."
	LedgerDayPrefix = "day."
)

// DayLayout is how a day is written in day.<day> keys: the UTC date.
const DayLayout = "2006-01-02"

// Target names one value of a projection: a bucket and a key in it.
type Target struct {
	Bucket string
	Key    string
}

func (t Target) String() string { return t.Bucket + "/" + t.Key }

// Shared reports whether many jobs' events change the value: a day
// ledger. Every other value is one job's (its status, observation, job
// ledger, or the ledger of a key it made).
func (t Target) Shared() bool {
	return t.Bucket == LedgerBucket && strings.HasPrefix(t.Key, LedgerDayPrefix)
}

// StatusTarget is the status value of a job.
func StatusTarget(jobID string) Target { return Target{StatusBucket, jobID} }

// ObservationTarget is the stored observation of a job.
func ObservationTarget(jobID string) Target { return Target{ObservationsBucket, jobID} }

// KeyTarget is the ledger value of an attempt key.
func KeyTarget(key string) Target { return Target{LedgerBucket, LedgerKeyPrefix + key} }

// JobTarget is the ledger value of a job.
func JobTarget(jobID string) Target { return Target{LedgerBucket, LedgerJobPrefix + jobID} }

// DayTarget is the ledger value of the UTC day that t falls in.
func DayTarget(t time.Time) Target {
	return Target{LedgerBucket, LedgerDayPrefix + t.UTC().Format(DayLayout)}
}

// Targets lists the values an event changes, each once. Every event
// changes its job's status; the others follow from the event alone, so a
// runner can group a batch of events by value before reading any. An
// attempt key that a KV key cannot hold (serpent's keys are UUIDs, so only
// a doctored log has one) gets no ledger value.
func Targets(e events.Event) []Target {
	out := []Target{StatusTarget(e.JobID)}
	add := func(ts ...Target) {
		for _, t := range ts {
			if ValidKey(t.Key) && !containsTarget(out, t) {
				out = append(out, t)
			}
		}
	}
	job, day := JobTarget(e.JobID), DayTarget(e.Time)
	switch d := e.Data.(type) {
	case events.AttemptCreated:
		add(KeyTarget(d.Key), job)
	case events.KeyRotated:
		add(KeyTarget(d.NewKey), job)
	case events.Sent:
		add(KeyTarget(d.Key), job, day)
	case events.OutcomeClassified:
		add(KeyTarget(d.Key), job)
		if d.Replayed {
			add(day)
		}
	case events.DeadlineReached:
		add(KeyTarget(d.Key))
	case events.Reconciled:
		for _, k := range d.Keys {
			add(KeyTarget(k))
		}
		for _, en := range d.Entries {
			add(KeyTarget(en.Key))
		}
		add(job)
		if d.Verdict == aggregate.VerdictCharged || len(d.Entries) > 0 {
			add(day)
		}
	case events.ObservationStored:
		add(ObservationTarget(e.JobID), KeyTarget(d.Key), job, day)
	case events.RepurchaseAuthorized:
		add(job, day)
	case events.ChargesChecked:
		add(KeyTarget(d.Key), job)
		if d.Charges > 1 {
			add(day)
		}
	}
	return out
}

func containsTarget(ts []Target, t Target) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// ValidKey reports whether a KV bucket can hold s as a key: letters,
// digits and -/_=. with no empty dot-separated token.
func ValidKey(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '/', c == '_', c == '=':
		case c == '.':
			if s[i-1] == '.' {
				return false
			}
		default:
			return false
		}
	}
	return true
}
