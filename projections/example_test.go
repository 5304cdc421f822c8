package projections_test

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

// Fold a job's events into its status value and its day's ledger; the
// same events again change nothing.
func ExampleProjection_Fold() {
	now := time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)
	ids := projectionstest.IDsFrom(0)
	sched, _ := aggregate.NewSchedule(aggregate.ScheduleCommand{Slot: "2026-12-02T14:00:00Z",
		Query: "espresso scale", Country: "US", Language: "en", Device: "mobile"}, aggregate.DefaultPolicy(), "example")
	var s aggregate.State
	var recs []projections.Record
	decide := func(in aggregate.Input) {
		evs, _ := aggregate.Decide(s, in, now, ids)
		for _, e := range evs {
			s = aggregate.Apply(s, e)
			recs = append(recs, projections.Record{Seq: uint64(len(recs) + 1), Event: e})
		}
	}
	decide(sched)
	decide(aggregate.Due{Worker: "w1"})
	key, _ := s.Current()
	decide(aggregate.Outcome{Key: key.Key, Try: 1, Status: 200, RequestID: "req_1", Pages: 1,
		Result: []byte(`{"organic":[]}`)})

	p := projections.New(projections.Config{})
	status, _, _ := p.Fold(projections.StatusTarget(s.JobID), nil, recs)
	var v projections.StatusValue
	_ = json.Unmarshal(status, &v)
	fmt.Println("status:", v.Status, "seq:", v.Seq, "sends:", v.Sends)

	day := projections.DayTarget(now)
	_, byTarget := projections.Group(recs)
	ledger, _, _ := p.Fold(day, nil, byTarget[day])
	var d projections.DayLedger
	_ = json.Unmarshal(ledger, &d)
	fmt.Println(day.Key, "searches:", d.Searches, "pages:", d.Pages, "est. spend:", d.EstSpendMicros)

	_, changed, _ := p.Fold(projections.StatusTarget(s.JobID), status, recs)
	fmt.Println("changed by a redelivery:", changed)
	// Output:
	// status: succeeded seq: 4 sends: 1
	// day.2026-12-02 searches: 1 pages: 1 est. spend: 1000
	// changed by a redelivery: false
}
