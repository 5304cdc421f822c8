package audit_test

import (
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// Audit a job whose reply was lost: pending while it waits for its resend,
// stuck once it has waited far too long, and a broken promise when the
// key is sent again past its deadline.
func ExampleCheckJob() {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	ids := projectionstest.IDsFrom(0)
	sched, _ := aggregate.NewSchedule(aggregate.ScheduleCommand{Slot: "2026-12-02T14:00:00Z",
		Query: "espresso scale", Country: "US", Language: "en", Device: "mobile"}, aggregate.DefaultPolicy(), "example")
	var s aggregate.State
	var log []events.Event
	decide := func(in aggregate.Input, at time.Time) {
		evs, _ := aggregate.Decide(s, in, at, ids)
		for _, e := range evs {
			s = aggregate.Apply(s, e)
		}
		log = append(log, evs...)
	}
	decide(sched, now)
	decide(aggregate.Due{Worker: "w1"}, now)
	key, _ := s.Current()
	decide(aggregate.Outcome{Key: key.Key, Try: 1, Unknown: "connection_reset"}, now)

	j := audit.CheckJob(log, audit.Options{Now: now})
	fmt.Println("pending:", j.Pending != "", len(j.Findings))
	j = audit.CheckJob(log, audit.Options{Now: now.Add(time.Hour)})
	fmt.Println(j.Findings[0].Rule)

	late := now.Add(14 * time.Minute) // the key's deadline is 13 minutes after its first send
	decide(aggregate.Due{Worker: "w1"}, now.Add(2*time.Second))
	log[len(log)-1].Time = late
	j = audit.CheckJob(log, audit.Options{Now: late})
	fmt.Println(j.Findings[0].Rule)
	// Output:
	// pending: true 0
	// terminal_or_pending
	// never_past_deadline
}
