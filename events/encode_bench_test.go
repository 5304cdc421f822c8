package events_test

import (
	"encoding/json"
	"testing"

	"github.com/serpent-engine/serpent/events"
)

func BenchmarkEncodeObservation(b *testing.B) {
	res := json.RawMessage(`{"requestId":"req_0123456789","search":{"query":"espresso scale","country":"US","language":"en","device":"mobile","limit":10},"organic":[` +
		`{"position":1,"title":"Best espresso scales of 2026","link":"https://example.com/a","snippet":"We tested twenty scales for speed, accuracy and the things that matter."},` +
		`{"position":2,"title":"Best espresso scales of 2026","link":"https://example.com/a","snippet":"We tested twenty scales for speed, accuracy and the things that matter."},` +
		`{"position":3,"title":"Best espresso scales of 2026","link":"https://example.com/a","snippet":"We tested twenty scales for speed, accuracy and the things that matter."}],"pages":1}`)
	e := sampleEvent(events.ObservationStored{Key: sampleKey, RequestID: "req_0123456789", Pages: 1, Result: res}, 4)
	for b.Loop() {
		if _, err := events.Encode(e); err != nil {
			b.Fatal(err)
		}
	}
}
