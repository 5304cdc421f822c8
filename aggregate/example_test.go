package aggregate_test

import (
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// Fold a job's history into its state and ask what it needs next.
func ExampleFold() {
	ids := &seqIDs{}
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	sched, _ := aggregate.NewSchedule(aggregate.ScheduleCommand{
		Slot: "2026-12-02T14:00:00Z", Query: "espresso scale", Country: "US", Language: "en", Device: "mobile",
	}, aggregate.DefaultPolicy(), "example")

	// The history of a job: scheduled, sent, and the reply was lost.
	var history []events.Event
	for _, in := range []aggregate.Input{sched, aggregate.Due{Worker: "w1"}} {
		evs, _ := aggregate.Decide(aggregate.Fold(history), in, now, ids)
		history = append(history, evs...)
	}
	s := aggregate.Fold(history)
	key, _ := s.Current()
	evs, _ := aggregate.Decide(s, aggregate.Outcome{Key: key.Key, Try: 1, Unknown: "connection"}, now, ids)
	history = append(history, evs...)

	s = aggregate.Fold(history)
	for _, e := range history {
		fmt.Println(e.Version, e.Type())
	}
	fmt.Println("status:", s.Status)
	fmt.Println("next:", s.Next(now).Step, "with the same key:", s.Attempts[0].Key == key.Key)
	// Output:
	// 1 JobScheduled
	// 2 AttemptCreated
	// 3 Sent
	// 4 OutcomeClassified
	// status: retrying
	// next: wait with the same key: true
}

// Decide what a confirmed 408 search_timeout leads to: the outcome and a new
// key, written together before the next request.
func ExampleDecide() {
	ids := &seqIDs{}
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	sched, _ := aggregate.NewSchedule(aggregate.ScheduleCommand{
		Slot: "2026-12-02T14:00:00Z", Query: "espresso scale", Country: "US", Language: "en", Device: "mobile",
	}, aggregate.DefaultPolicy(), "example")
	var s aggregate.State
	for _, in := range []aggregate.Input{sched, aggregate.Due{Worker: "w1"}} {
		evs, _ := aggregate.Decide(s, in, now, ids)
		for _, e := range evs {
			s = aggregate.Apply(s, e)
		}
	}
	cur, _ := s.Current()
	evs, err := aggregate.Decide(s, aggregate.Outcome{
		Key: cur.Key, Try: 1, Status: 408, Code: "search_timeout", RequestID: "req_1",
	}, now, ids)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range evs {
		switch d := e.Data.(type) {
		case events.OutcomeClassified:
			fmt.Println(e.Type(), d.Class, d.Action)
		case events.KeyRotated:
			fmt.Println(e.Type(), "attempt", d.Attempt, "new key differs:", d.NewKey != d.OldKey)
		}
	}
	// Output:
	// OutcomeClassified retryable retry_new_key
	// KeyRotated attempt 2 new key differs: true
}
