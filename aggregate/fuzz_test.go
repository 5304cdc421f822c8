package aggregate_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/events"
)

// FuzzDecide feeds arbitrary input sequences, including nonsense (outcomes
// for unknown keys, ledger answers out of turn, huge clock jumps), to one
// job. Decide may refuse an input, but it must never panic, never produce an
// event the log would refuse, and never break a promise Verify checks.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{1, 0, 2, 3, 1, 4, 2, 9})
	f.Add([]byte{1, 0, 2, 0, 1, 200, 2, 1, 1, 8, 3, 0})
	f.Add([]byte{1, 0, 2, 5, 6, 0, 1, 0, 2, 7})
	statuses := []int{0, 200, 408, 424, 503, 429, 409, 409, 503, 422, 401, 500}
	codes := []string{"", "", "search_timeout", "upstream_failed", "service_unavailable", "rate_limited",
		"idempotency_in_progress", "idempotency_replay_unavailable", "billing_unavailable", "invalid_request", "unauthorized", "x"}
	f.Fuzz(func(t *testing.T, program []byte) {
		ids := &seqIDs{}
		now := t0
		sched, err := aggregate.NewSchedule(aggregate.ScheduleCommand{Slot: t0.Format(time.RFC3339),
			Query: "q", Country: "US", Language: "en", Device: "desktop"}, aggregate.DefaultPolicy(), "fuzz")
		if err != nil {
			t.Fatal(err)
		}
		s := aggregate.State{}
		var log []events.Event
		step := func(in aggregate.Input) {
			evs, err := aggregate.Decide(s, in, now, ids)
			if err != nil {
				return
			}
			for _, e := range evs {
				if _, err := events.Encode(e); err != nil {
					t.Fatalf("Decide(%T) made an unstorable event: %v", in, err)
				}
				s = aggregate.Apply(s, e)
			}
			log = append(log, evs...)
		}
		step(sched)
		for i := 0; i+1 < len(program); i += 2 {
			op, arg := program[i]%8, int(program[i+1])
			cur, _ := s.Current()
			key := cur.Key
			if arg%7 == 6 {
				key = "stranger"
			}
			switch op {
			case 0:
				now = now.Add(time.Duration(arg) * 7 * time.Second)
			case 1:
				step(aggregate.Due{Worker: []string{"a", "b"}[arg%2]})
			case 2, 3:
				k := arg % len(statuses)
				o := aggregate.Outcome{Key: key, Try: cur.Tries - arg%2, Status: statuses[k], Code: codes[k], RequestID: "r",
					Replayed: op == 3}
				if o.Status == 200 {
					o.Result = json.RawMessage(`{"requestId":"r"}`)
				}
				if o.Status == 429 {
					o.RetryAfter = time.Duration(arg) * time.Second
				}
				step(o)
			case 4:
				q := s.ReconcileQuery()
				a := aggregate.LedgerAnswer{Keys: q.Keys, RequestIDs: q.RequestIDs}
				if arg%3 >= 1 && len(q.Keys) > 0 {
					a.Entries = []events.LedgerEntry{{RequestID: "r", Key: q.Keys[0], BilledPages: 1}}
				}
				if arg%3 == 2 && len(q.Keys) > 0 { // the API charged the key twice
					a.Entries = append(a.Entries, events.LedgerEntry{RequestID: "r2", Key: q.Keys[0], BilledPages: 1})
				}
				step(a)
			case 5:
				step(aggregate.Cancel{By: "ops", Reason: "fuzz"})
			case 6:
				step(aggregate.AuthorizeRepurchase{By: "ops", Reason: "fuzz"})
			case 7:
				now = now.Add(time.Duration(arg) * time.Hour)
			}
			_ = s.Next(now)
		}
		if v := aggregate.Verify(log); len(v) > 0 {
			t.Fatalf("violations: %v", v)
		}
	})
}
