package chaos_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/serper/sandbox"
)

var subjectToken = regexp.MustCompile(`^[a-z0-9_]+$`)

// FuzzCommand feeds arbitrary bytes to the intake's rules
// (engine.ParseCommand, then aggregate.NewSchedule): it never panics, a
// command is a job or a rejection with a reason that is a subject token and
// a message, and a valid command's job is the same however it is spelled
// again from its canonical form (promise 1).
func FuzzCommand(f *testing.F) {
	for _, s := range []string{
		`{"slot":"2026-12-02T14:00:00Z","query":"espresso scale","country":"US","language":"en","device":"mobile","limit":10}`,
		`{"slot":"2026-12-02T15:00:00+01:00","query":"  espresso   scale ","country":"us","language":"EN","device":"MOBILE"}`,
		`{"slot":"2026-12-02T14:00:00.123456789Z","query":"q","country":"GB","language":"de","device":"desktop","account":"acme-1","priority":"HIGH"}`,
		`{"slot":"tomorrow","query":"","country":"USA","language":"english","device":"tv","limit":1000}`,
		`{"slot":"2026-12-02T14:00:00Z","query":"q","colour":"red"}`,
		`{"slot":"2026-12-02T14:00:00Z","query":"\u00e9\u0000\ud800"} {}`,
		`not json`, `[]`, `null`, `{}`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := engine.ParseCommand(data)
		var rej *engine.RejectError
		if err != nil {
			if !errors.As(err, &rej) || !subjectToken.MatchString(rej.Reason) || rej.Msg == "" {
				t.Fatalf("ParseCommand(%q): %v is not a rejection with a reason and a message", data, err)
			}
			return
		}
		s, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "fuzz")
		if err != nil {
			var ve *aggregate.ValidationError
			if !errors.As(err, &ve) || len(ve.Fields) == 0 || !subjectToken.MatchString(ve.Reason()) {
				t.Fatalf("NewSchedule(%q): %v is not a validation error naming its fields", data, err)
			}
			return
		}
		if err := events.ValidateJobID(s.JobID); err != nil {
			t.Fatalf("job id %q: %v", s.JobID, err)
		}
		if aggregate.BodyHash(s.Body) == "" || !json.Valid([]byte(s.Body)) {
			t.Fatalf("body %q is not JSON", s.Body)
		}
		canon, _, err := c.Canonical()
		if err != nil {
			t.Fatalf("a valid command has no canonical form: %v", err)
		}
		again, _ := json.Marshal(canon)
		c2, err := engine.ParseCommand(again)
		if err != nil {
			t.Fatalf("canonical form %s does not parse: %v", again, err)
		}
		s2, err := aggregate.NewSchedule(c2, aggregate.DefaultPolicy(), "fuzz")
		if err != nil || s2.JobID != s.JobID || s2.Body != s.Body {
			t.Fatalf("canonical form %s is another job (%v): %s, want %s", again, err, s2.JobID, s.JobID)
		}
	})
}

// FuzzSandboxConfig decodes arbitrary JSON as a sandbox config (serpent
// sandbox --config, serpent run --sandbox-config): never a panic; a config
// that validates starts a sandbox, survives a JSON round trip, and never
// prints a token other than the public sandbox token.
func FuzzSandboxConfig(f *testing.F) {
	for _, s := range []string{
		`{"seed":7,"searchTime":"2ms","retryAfter":"1s","faults":{"dropBeforeSearch":0.04,"earlyExpiry":0.5}}`,
		`{"token":"s3cret-token-value","replayWindow":"15m","freePages":10,"priceMicros":1000}`,
		`{"replayWindow":900000000000,"faults":{"timeout408":1.5}}`,
		`{"faults":{"dropBefore":0.1}}`, `{"searchTime":"-1s"}`, `{}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cfg sandbox.Config
		if err := json.Unmarshal(data, &cfg); err != nil {
			return
		}
		printed := cfg.String()
		if secret := cfg.Token; len(secret) >= 12 && secret != sandbox.DefaultToken && strings.Contains(printed, secret) {
			t.Fatalf("the config prints its token: %s", printed)
		}
		if cfg.Validate() != nil {
			return
		}
		cfg.SearchTime, cfg.SlowSearchTime = min(cfg.SearchTime, time.Millisecond), min(cfg.SlowSearchTime, time.Millisecond)
		srv := sandbox.New(cfg)
		_ = srv.Close()
		out, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		var back sandbox.Config
		back.Token = cfg.Token // marshalling redacts it
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%s does not decode again: %v", out, err)
		}
		if back.Faults != cfg.Faults || back.ReplayWindow != cfg.ReplayWindow || back.Seed != cfg.Seed {
			t.Fatalf("round trip changed the config: %s", out)
		}
	})
}

// FuzzOutcomeRules parses arbitrary outcome table rows (serpent run
// --outcome-rules): never a panic, and a table that is accepted keeps the
// promises a table can break: an unknown outcome never mints a new key nor
// fails the job, a decoded 200 is stored, and only definite outcomes lead
// to a new key.
func FuzzOutcomeRules(f *testing.F) {
	for _, s := range []string{
		`[{"status":500,"class":"retryable","action":"retry_new_key"}]`,
		`[{"status":0,"class":"retryable","action":"retry_new_key"}]`,
		`[{"status":409,"code":"idempotency_in_progress","class":"in_progress","action":"fail"}]`,
		`[{"status":200,"class":"success","action":"fail"}]`,
		`[{"status":422,"class":"failure","action":"fail"},{"status":422,"class":"failure","action":"fail"}]`,
		`[]`, `null`, `{}`, `[{"status":-1}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		table, err := aggregate.ParseRules(data)
		if err != nil {
			return
		}
		if err := table.Validate(); err != nil {
			t.Fatalf("ParseRules accepted a table that does not validate: %v", err)
		}
		for _, status := range []int{0, 200, 408, 409, 422, 429, 500, 503, 599} {
			for _, code := range []string{"", "idempotency_in_progress", "idempotency_replay_unavailable", "billing_unavailable", "x"} {
				r := table.Classify(status, code)
				switch {
				case status == 0 && (r.Action == aggregate.ActionRetryNewKey || r.Action == aggregate.ActionFail):
					t.Fatalf("an unknown outcome leads to %s", r.Action)
				case status == 200 && r.Action != aggregate.ActionStore:
					t.Fatalf("a decoded 200 leads to %s", r.Action)
				case r.Action == aggregate.ActionRetryNewKey && !r.Class.Definite():
					t.Fatalf("%d %q: a new key after an outcome of class %s", status, code, r.Class)
				}
			}
		}
	})
}
