package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
)

// command is one schedule command a run publishes.
type command struct {
	id      string // the publish's message id, so a retried publish is stored once
	payload []byte
	job     string // the job it must become, "" for a malformed one
	reason  string // the rejection a malformed one must get
}

// commands draws a run's commands: one per job (slots spread from start),
// some published again in another spelling, malformed ones mixed in, in a
// shuffled order. Every job has its own body, so a charge per body is a
// charge per job.
func commands(cfg Config, start time.Time, r *rand.Rand) []command {
	var out []command
	for i := range cfg.Jobs {
		slot := start.Add(time.Duration(r.Int64N(int64(cfg.Spread) + 1))).Truncate(time.Second)
		c := aggregate.ScheduleCommand{Slot: slot.UTC().Format(time.RFC3339),
			Query:   fmt.Sprintf("chaos %d %d observation %d", cfg.Seed, start.Unix(), i),
			Country: "US", Language: "en", Device: []string{"desktop", "mobile"}[r.IntN(2)]}
		if r.IntN(20) == 0 {
			c.Limit = aggregate.LimitOf(20)
		}
		payload, _ := json.Marshal(c)
		job := JobOf(payload)
		out = append(out, command{payload: payload, job: job})
		if r.Float64() < cfg.Duplicates {
			c.Slot = slot.In(time.FixedZone("", -5*3600)).Format(time.RFC3339)
			c.Query = "  " + strings.ReplaceAll(c.Query, " ", "  ") + "  "
			c.Country, c.Device = strings.ToLower(c.Country), strings.ToUpper(c.Device)
			again, _ := json.Marshal(c)
			out = append(out, command{payload: again, job: job})
		}
	}
	for i := range cfg.Malformed {
		m := malformed[i%len(malformed)]
		out = append(out, command{payload: []byte(m.payload(i)), reason: m.reason})
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	for i := range out {
		out[i].id = fmt.Sprintf("chaos-%d-%d-%d", cfg.Seed, start.UnixNano(), i)
	}
	return out
}

// malformed are bad commands, each with the rejection it must get.
var malformed = []struct {
	reason  string
	payload func(i int) string
}{
	{"invalid_slot", func(i int) string {
		return fmt.Sprintf(`{"slot":"next tuesday %d","query":"q","country":"US","language":"en","device":"mobile"}`, i)
	}},
	{"invalid_country", func(i int) string {
		return fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":"q %d","country":"USA","language":"en","device":"mobile"}`, i)
	}},
	{"invalid_device", func(i int) string {
		return fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":"q %d","country":"US","language":"en","device":"tv"}`, i)
	}},
	{"invalid_limit", func(i int) string {
		return fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":"q %d","country":"US","language":"en","device":"mobile","limit":101}`, i)
	}},
	{"invalid_language", func(i int) string {
		return fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":"q %d","country":"US","language":"english","device":"mobile"}`, i)
	}},
	{engine.ReasonMalformed, func(i int) string {
		return fmt.Sprintf(`{"slot":"2026-12-02T14:00:00Z","query":"q %d","colour":"red"}`, i)
	}},
	{engine.ReasonMalformed, func(i int) string { return fmt.Sprintf("not json %d", i) }},
	{engine.ReasonTooLarge, func(i int) string {
		return fmt.Sprintf(`{"query":"%d%s"}`, i, strings.Repeat("x", engine.MaxCommandBytes))
	}},
}

// JobOf is the job a command maps to, by the engine's own rules, or "" if
// the command is invalid.
func JobOf(payload []byte) string {
	c, err := engine.ParseCommand(payload)
	if err != nil {
		return ""
	}
	s, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "")
	if err != nil {
		return ""
	}
	return s.JobID
}
