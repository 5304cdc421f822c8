package sim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

// command is one message published on SERP_COMMANDS, and what became of
// it.
type command struct {
	subject   string // serp.cmd.schedule, unless it is a stray
	payload   []byte
	publishAt time.Time
	// job is the job it must become, or reason the rejection it must get.
	job, reason string

	// The rejection the intake recorded, guarded by the world's mutex.
	rejected string
}

// strayCommand is a subject of SERP_COMMANDS that nothing reads.
const strayCommand = snats.ScheduleSubject + ".v2"

// commands draws the world's commands: one per job, some published again
// in an equivalent spelling, malformed ones of every kind, and a valid one
// on a subject nothing reads (a typo, a version the engine does not know).
// Every job has its own body, so a charge per body is a charge per job.
func commands(cfg Config, start time.Time) []*command {
	r := rand.New(rand.NewPCG(cfg.Seed, 0xc0de))
	at := func() time.Time {
		return start.Add(time.Duration(r.Int64N(int64(cfg.Spread)))).Truncate(time.Millisecond)
	}
	// publish is when a valid command of slot is published.
	publish := func(slot time.Time) time.Time {
		p := at()
		if latest := slot.Add(-cfg.Ahead); cfg.Ahead > 0 && p.After(latest) {
			p = latest
		}
		return p
	}
	var out []*command
	for i := range cfg.Jobs {
		slot := at().Truncate(time.Second)
		query := fmt.Sprintf("sim %d observation %d", cfg.Seed, i)
		if r.IntN(20) == 0 {
			query = sandbox.ZeroResultsPrefix + " " + query
		}
		c := aggregate.ScheduleCommand{Slot: slot.Format(time.RFC3339), Query: query, Country: "US",
			Language: "en", Device: []string{"desktop", "mobile"}[r.IntN(2)], Limit: aggregate.LimitOf(limits[r.IntN(len(limits))])}
		payload, _ := json.Marshal(c)
		job := jobOf(payload)
		out = append(out, &command{subject: snats.ScheduleSubject, payload: payload, publishAt: publish(slot), job: job})
		if r.Float64() < cfg.Duplicates {
			// The same observation in another spelling: another zone,
			// other spacing and case. It is the same job.
			c.Slot = slot.In(time.FixedZone("", 3600)).Format(time.RFC3339)
			c.Query = "  " + strings.ReplaceAll(c.Query, " ", "   ") + " "
			c.Country, c.Device = strings.ToLower(c.Country), strings.ToUpper(c.Device)
			again, _ := json.Marshal(c)
			out = append(out, &command{subject: snats.ScheduleSubject, payload: again, publishAt: publish(slot), job: job})
		}
	}
	for i := range cfg.Malformed {
		m := malformed[r.IntN(len(malformed))]
		out = append(out, &command{subject: snats.ScheduleSubject, payload: []byte(m.payload(i)), publishAt: at(), reason: m.reason})
	}
	stray := fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":"sim %d stray","country":"US","language":"en","device":"mobile"}`, cfg.Seed)
	out = append(out, &command{subject: strayCommand, payload: []byte(stray), publishAt: at(), reason: engine.ReasonUnknownSubject})
	return out
}

// limits of the jobs' searches: mostly the default, sometimes more pages
// (a bigger charge, and a bigger result to carry).
var limits = []int{0, 0, 0, 10, 10, 10, 20, 20, 50, 100}

// malformed are bad commands, each with the rejection it must get.
var malformed = []struct {
	reason  string
	payload func(i int) string
}{
	{"invalid_slot", func(i int) string {
		return fmt.Sprintf(`{"slot":"tomorrow %d","query":"q","country":"US","language":"en","device":"mobile"}`, i)
	}},
	{"invalid_country", func(i int) string {
		return fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":"q %d","country":"USA","language":"en","device":"mobile"}`, i)
	}},
	{"invalid_device", func(i int) string {
		return fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":"q %d","country":"US","language":"en","device":"tv"}`, i)
	}},
	{"invalid_limit", func(i int) string {
		return fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":"q %d","country":"US","language":"en","device":"mobile","limit":500}`, i)
	}},
	{"invalid_query", func(i int) string {
		return fmt.Sprintf(`{"slot":"2026-12-02T14:00:%02dZ","query":"   ","country":"US","language":"en","device":"mobile"}`, i%60)
	}},
	{engine.ReasonMalformed, func(i int) string {
		return fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":"q %d","colour":"red"}`, i)
	}},
	{engine.ReasonMalformed, func(i int) string { return fmt.Sprintf("<xml>%d</xml>", i) }},
	{engine.ReasonTooLarge, func(i int) string {
		return fmt.Sprintf(`{"query":"%d%s"}`, i, strings.Repeat("x", engine.MaxCommandBytes))
	}},
}

// jobOf is the job a valid command must become.
func jobOf(payload []byte) string {
	c, err := engine.ParseCommand(payload)
	if err != nil {
		panic(err)
	}
	s, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "")
	if err != nil {
		panic(err)
	}
	return s.JobID
}
