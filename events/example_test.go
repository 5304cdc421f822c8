package events_test

import (
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/events"
)

// Encode an event for the log and read it back.
func Example() {
	e := events.Event{
		ID:      "01KBG5Q3R00000000000000001",
		JobID:   "3f1c9a7e5b2d4c6e8a0b1c2d3e4f5a6b",
		Version: 2,
		Time:    time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC),
		Data:    events.AttemptCreated{Attempt: 1, Key: "0b8f0d9e-3c39-4d0e-9d4b-6c1a2f3e4d5c", BodySHA256: "5d0c"},
	}
	b, err := events.Encode(e)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(b))
	back, err := events.Decode(b)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back.Type(), back.Data.(events.AttemptCreated).Key)

	_, err = events.Decode([]byte(`{"type":"KeyMelted","schema":1,"job":"3f1c","data":{}}`))
	fmt.Println(err)
	// Output:
	// {"type":"AttemptCreated","schema":1,"id":"01KBG5Q3R00000000000000001","job":"3f1c9a7e5b2d4c6e8a0b1c2d3e4f5a6b","version":2,"time":"2026-12-02T14:00:00Z","data":{"attempt":1,"key":"0b8f0d9e-3c39-4d0e-9d4b-6c1a2f3e4d5c","body_sha256":"5d0c"}}
	// AttemptCreated 0b8f0d9e-3c39-4d0e-9d4b-6c1a2f3e4d5c
	// events: cannot decode KeyMelted (schema 1) of job 3f1c: unknown event type "KeyMelted"
}
