package events_test

import (
	"encoding/binary"
	"encoding/json"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/serpent-engine/serpent/events"
)

// t0 is the fixed time of every sample event.
var t0 = time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)

const (
	sampleJob  = "3f1c9a7e5b2d4c6e8a0b1c2d3e4f5a6b"
	sampleKey  = "0b8f0d9e-3c39-4d0e-9d4b-6c1a2f3e4d5c"
	sampleKey2 = "6e2d1c0b-9a8f-4e7d-8c6b-5a4f3e2d1c0b"
	sampleBody = `{"query":"espresso scale","country":"US","language":"en","device":"mobile","limit":10}`
	sampleHash = "5d0c0b7ad7b0c2a4a1e6f2d9f0a3e8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f1"
)

// samples holds one populated payload of every type, at its current schema.
func samples() map[string]events.Payload {
	policy := events.RetryPolicy{
		BaseDelay: events.Duration(time.Second), MaxDelay: events.Duration(time.Minute),
		MinDelay: events.Duration(100 * time.Millisecond), RetryAfterMax: events.Duration(5 * time.Minute),
		ReplayWindow: events.Duration(15 * time.Minute), SafetyMargin: events.Duration(2 * time.Minute),
		Lease: events.Duration(2 * time.Minute), MaxKeys: 5, MaxAge: events.Duration(24 * time.Hour),
	}
	return map[string]events.Payload{
		events.TypeJobScheduled: events.JobScheduled{
			Slot:   t0,
			Search: events.SearchContext{Query: "espresso scale", Country: "US", Language: "en", Device: "mobile", Limit: 10},
			Body:   sampleBody, BodySHA256: sampleHash, Policy: policy, NotBefore: t0,
			Account: "default", Priority: "normal", Source: "serp.cmd.schedule",
		},
		events.TypeAttemptCreated: events.AttemptCreated{Attempt: 1, Key: sampleKey, BodySHA256: sampleHash},
		events.TypeSent: events.Sent{Key: sampleKey, Attempt: 1, Try: 1, Worker: "worker-1",
			LeaseUntil: t0.Add(2 * time.Minute), Deadline: t0.Add(13 * time.Minute)},
		events.TypeOutcomeClassified: events.OutcomeClassified{Key: sampleKey, Try: 1, Status: 408, Code: "search_timeout",
			RequestID: "req_01", Class: "retryable", Action: "retry_new_key", Attempt: 1, Sends: 1, NextRunAt: t0.Add(2 * time.Second)},
		events.TypeKeyRotated: events.KeyRotated{OldKey: sampleKey, NewKey: sampleKey2, Attempt: 2, BodySHA256: sampleHash,
			Reason: "search_timeout", NextRunAt: t0.Add(2 * time.Second)},
		events.TypeDeadlineReached: events.DeadlineReached{Key: sampleKey, Deadline: t0.Add(13 * time.Minute), Reason: "replay_deadline"},
		events.TypeReconciled: events.Reconciled{Keys: []string{sampleKey}, RequestIDs: []string{"req_01"},
			Entries: []events.LedgerEntry{{RequestID: "req_01", Key: sampleKey, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: t0}},
			Charges: 1, Verdict: "charged", Action: "charged_no_result"},
		events.TypeObservationStored: events.ObservationStored{Key: sampleKey2, RequestID: "req_02", Pages: 1,
			Result: json.RawMessage(`{"requestId":"req_02","organic":[{"position":1,"title":"Best espresso scales","link":"https://example.com/"}]}`)},
		events.TypeJobFailed:            events.JobFailed{Reason: "api_error", Key: sampleKey, Status: 422, Code: "invalid_request", Message: "limit: must be 1..100", RequestID: "req_03"},
		events.TypeJobCancelled:         events.JobCancelled{By: "operator", Reason: "query retired"},
		events.TypeRepurchaseAuthorized: events.RepurchaseAuthorized{By: "operator", Reason: "result needed for report"},
		events.TypeChargesChecked: events.ChargesChecked{Key: sampleKey2, RequestIDs: []string{"req_02"},
			Entries: []events.LedgerEntry{{RequestID: "req_02", Key: sampleKey2, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: t0},
				{RequestID: "req_04", Key: sampleKey2, Pages: 1, BilledPages: 1, AmountMicros: 1000, At: t0}},
			Charges: 2, Verdict: "double_charge"},
	}
}

// sampleEvent wraps a payload in a fixed envelope.
func sampleEvent(p events.Payload, version uint64) events.Event {
	return events.Event{
		ID:      sampleID(version),
		JobID:   sampleJob,
		Version: version,
		Time:    t0,
		Data:    p,
	}
}

// sampleID is a fixed ULID for the sample event of a version.
func sampleID(version uint64) string {
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(t0))
	var entropy [10]byte
	binary.BigEndian.PutUint64(entropy[2:], version)
	_ = id.SetEntropy(entropy[:])
	return id.String()
}
