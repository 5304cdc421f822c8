package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/serpent-engine/serpent/aggregate"
	"github.com/serpent-engine/serpent/audit"
	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/events"
	snats "github.com/serpent-engine/serpent/nats"
	"github.com/serpent-engine/serpent/nats/natstest"
	"github.com/serpent-engine/serpent/serper"
	"github.com/serpent-engine/serpent/serper/sandbox"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "record testdata/audit again: run the engine against the sandbox, "+
	"write its log and ledger, the doctored copies and the expected reports")

const auditDir = "../../testdata/audit"

// auditManifest lists the recorded scenarios (testdata/audit/manifest.json).
type auditManifest struct {
	// Now is the time the reports judge pending jobs at.
	Now       string          `json:"now"`
	Scenarios []auditScenario `json:"scenarios"`
}

type auditScenario struct {
	Name     string `json:"name"`
	Events   string `json:"events"`
	Ledger   string `json:"ledger,omitempty"`
	Doctored string `json:"doctored,omitempty"`
	// JobID and Rules are what the report must flag: every violation is
	// about JobID ("" for a charge of no job) and breaks one of Rules, and
	// each of Rules is broken.
	JobID string   `json:"job_id,omitempty"`
	Rules []string `json:"rules,omitempty"`
}

// TestAuditRecordings audits the recorded run and its doctored copies:
// the clean one keeps every promise, each doctored one is flagged with
// its job and rule, and every report is the recorded one.
func TestAuditRecordings(t *testing.T) {
	if *update {
		recordAudit(t)
	}
	b, err := os.ReadFile(filepath.Join(auditDir, "manifest.json"))
	require.NoError(t, err, "run go test ./internal/cli -run TestAuditRecordings -update")
	var m auditManifest
	require.NoError(t, json.Unmarshal(b, &m))
	require.Len(t, m.Scenarios, 7)
	for _, sc := range m.Scenarios {
		t.Run(sc.Name, func(t *testing.T) {
			args := []string{"audit", "--events", filepath.Join(auditDir, sc.Events), "--now", m.Now, "-o", "json"}
			if sc.Ledger != "" {
				args = append(args, "--ledger-file", filepath.Join(auditDir, sc.Ledger))
			}
			out, err := cli(t, "", args...)
			golden := filepath.Join(auditDir, sc.Name+".report.json")
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
			}
			want, rerr := os.ReadFile(golden)
			require.NoError(t, rerr)
			require.JSONEq(t, string(want), out)

			var rep audit.Report
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
			if len(sc.Rules) == 0 {
				require.NoError(t, err)
				require.Empty(t, rep.Violations)
				return
			}
			require.Error(t, err)
			require.Equal(t, 1, ExitCode(err), "a broken promise exits 1")
			var broken []string
			for _, v := range rep.Violations {
				require.Equal(t, sc.JobID, v.JobID, "%s", v)
				require.Contains(t, sc.Rules, v.Rule, "%s", v)
				broken = append(broken, v.Rule)
			}
			for _, r := range sc.Rules {
				require.Contains(t, broken, r)
			}
		})
	}
	t.Run("human report", func(t *testing.T) {
		out, err := cli(t, "", "audit", "--events", filepath.Join(auditDir, "gap.jsonl"), "--now", m.Now)
		require.Equal(t, 1, ExitCode(err))
		require.Contains(t, out, "broken promise(s):")
		require.Contains(t, out, aggregate.RuleGapless)
	})
}

// recordAudit runs the engine against a faulty sandbox, lets an operator
// buy a lost observation again and cancel a job, and records the log, the
// sandbox's ledger and the doctored copies.
func recordAudit(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sandbox.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"seed":11,"searchTime":"2ms","retryAfter":"1s","faults":{
		"dropAfterSearch":0.25,"timeout408":0.1,"earlyExpiry":0.4,"zeroResults":0.05,
		"billingUnavailable503":0.05,"gatewayPage502":0.05}}`), 0o644))
	r := startEngine(t, nil, "--data", filepath.Join(dir, "data"), "--nats-listen", "127.0.0.1:0", "--http", "",
		"--sandbox-config", cfg, "--base-delay", "20ms", "--max-delay", "200ms", "--log-level", "warn",
		"--client-timeout", "2s", "--lease", "12s")
	_, js := natstest.Connect(t, r.natsURL)
	ctx := context.Background()
	publish := func(p string) {
		_, err := js.Publish(ctx, snats.ScheduleSubject, []byte(p))
		require.NoError(t, err)
	}
	var jobs []string
	for i := range 40 {
		p := fmt.Sprintf(`{"slot":"2026-12-02T14:%02d:00Z","query":"coffee grinder %d","country":"US","language":"en","device":"desktop"}`, i, i)
		publish(p)
		if i%10 == 0 {
			publish(p)
		}
		jobs = append(jobs, jobOf(t, p))
	}
	for _, bad := range []string{`{"slot":"soon","query":"q","country":"US","language":"en","device":"mobile"}`, `not json`} {
		publish(bad)
	}
	later := `{"slot":"2031-01-01T00:00:00Z","query":"cancel me","country":"US","language":"en","device":"mobile"}`
	pending := `{"slot":"2031-01-01T00:00:00Z","query":"still to come","country":"US","language":"en","device":"mobile"}`
	publish(later)
	publish(pending)
	states := waitAllTerminal(t, js, jobs)

	var lost string
	for _, j := range jobs {
		if states[j].Status == aggregate.StatusChargedNoResult {
			lost = j
			break
		}
	}
	require.NotEmpty(t, lost, "the fault mix should lose one charged response; change the seed")
	_, err := cli(t, r.natsURL, "repurchase", lost, "--by", "auditor", "--reason", "recorded for the audit tests")
	require.NoError(t, err)
	natstest.WaitFor(t, 10*time.Second, func() error {
		_, err := cli(t, r.natsURL, "cancel", jobOf(t, later), "--by", "auditor", "--reason", "not needed")
		return err
	})
	waitAllTerminal(t, js, []string{lost, jobOf(t, later)})

	var lines [][]byte
	_, err = snats.EventLog(js).Read(ctx, 1, 0, 1000, func(msgs []snats.Message) error {
		for _, m := range msgs {
			parts, err := events.Split(m.Data) // a line an event
			if err != nil {
				return err
			}
			lines = append(lines, parts...)
		}
		return nil
	})
	require.NoError(t, err)
	evs := make([]events.Event, len(lines))
	for i, l := range lines {
		evs[i], err = events.Decode(l)
		require.NoError(t, err)
	}

	client, err := serper.New(serper.Config{BaseURL: r.sandboxURL, Token: sandbox.DefaultToken})
	require.NoError(t, err)
	defer client.CloseIdleConnections()
	var keys []string
	for _, e := range evs {
		switch d := e.Data.(type) {
		case events.AttemptCreated:
			keys = append(keys, d.Key)
		case events.KeyRotated:
			keys = append(keys, d.NewKey)
		}
	}
	ledger, err := client.Ledger(ctx, serper.LedgerQuery{Keys: keys})
	require.NoError(t, err)

	m := auditManifest{Now: evs[len(evs)-1].Time.Add(time.Minute).UTC().Format(time.RFC3339)}
	writeLines(t, "clean.jsonl", lines)
	writeLedger(t, "clean.ledger.json", ledger)
	m.Scenarios = append(m.Scenarios, auditScenario{Name: "clean", Events: "clean.jsonl", Ledger: "clean.ledger.json"})
	for _, d := range doctors(t, evs) {
		out := slices.Clone(lines)
		job := d.apply(&out)
		writeLines(t, d.name+".jsonl", out)
		m.Scenarios = append(m.Scenarios, auditScenario{Name: d.name, Events: d.name + ".jsonl", Doctored: d.what, JobID: job, Rules: d.rules})
	}
	accepted := ledger[0]
	for _, e := range ledger {
		if e.BilledPages > 0 || e.Pages > 0 {
			accepted = e
			break
		}
	}
	double := append(slices.Clone(ledger), serper.LedgerEntry{RequestID: "req_doctored_second", IdempotencyKey: accepted.IdempotencyKey,
		Pages: accepted.Pages, BilledPages: accepted.Pages, AmountMicros: int64(accepted.Pages) * 1000, BodySHA256: accepted.BodySHA256, At: accepted.At})
	writeLedger(t, "double_charge.ledger.json", double)
	m.Scenarios = append(m.Scenarios, auditScenario{Name: "double_charge", Events: "clean.jsonl", Ledger: "double_charge.ledger.json",
		Doctored: "the ledger charges an accepted key a second time", JobID: jobOfKey(evs, accepted.IdempotencyKey),
		Rules: []string{audit.RuleOneCharge, audit.RuleLedgerPurchases}})
	unknown := append(slices.Clone(ledger), serper.LedgerEntry{RequestID: "req_doctored_unknown",
		IdempotencyKey: "9b2f6c1e-0000-4000-8000-000000000000", Pages: 1, BilledPages: 1, AmountMicros: 1000, At: accepted.At})
	writeLedger(t, "unknown_charge.ledger.json", unknown)
	m.Scenarios = append(m.Scenarios, auditScenario{Name: "unknown_charge", Events: "clean.jsonl", Ledger: "unknown_charge.ledger.json",
		Doctored: "the ledger has a charge on a key no job ever made", Rules: []string{audit.RuleExplained}})
	b, err := json.MarshalIndent(m, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(auditDir, "manifest.json"), append(b, '\n'), 0o644))
}

// doctor changes one job of a recorded log in one way.
type doctor struct {
	name, what string
	rules      []string
	apply      func(lines *[][]byte) (jobID string)
}

func doctors(t *testing.T, evs []events.Event) []doctor {
	encode := func(e events.Event) []byte {
		b, err := events.Encode(e)
		require.NoError(t, err)
		return b
	}
	// find returns the index of the first event for which ok holds.
	find := func(ok func(i int, e events.Event) bool) int {
		for i, e := range evs {
			if ok(i, e) {
				return i
			}
		}
		t.Fatal("the recording has no event to doctor; change the seed")
		return -1
	}
	scheduled := func(job string) events.JobScheduled {
		return evs[find(func(_ int, e events.Event) bool { return e.JobID == job && e.Version == 1 })].Data.(events.JobScheduled)
	}
	return []doctor{
		{"past_deadline", "a key sent again after its deadline", []string{aggregate.RuleDeadline}, func(lines *[][]byte) string {
			// The second send of a key that was sent twice moves past the
			// key's deadline.
			first := map[string]time.Time{}
			i := find(func(_ int, e events.Event) bool {
				s, ok := e.Data.(events.Sent)
				if !ok {
					return false
				}
				if _, again := first[s.Key]; again {
					return true
				}
				first[s.Key] = e.Time
				return false
			})
			e := evs[i]
			p := scheduled(e.JobID).Policy
			e.Time = aggregate.KeyDeadline(p, first[e.Data.(events.Sent).Key]).Add(time.Second)
			(*lines)[i] = encode(e)
			return e.JobID
		}},
		{"second_charge", "a second observation stored for a finished job", []string{aggregate.RuleOnePurchase, aggregate.RuleAfterTerminal},
			func(lines *[][]byte) string {
				i := find(func(_ int, e events.Event) bool { return e.Type() == events.TypeObservationStored })
				e := evs[i]
				e.ID, e.Version, e.Time = ulid.Make().String(), e.Version+1, e.Time.Add(time.Second)
				*lines = slices.Insert(*lines, i+1, encode(e))
				return e.JobID
			}},
		{"body_change", "a new key stored with another body's hash", []string{aggregate.RuleOneBody}, func(lines *[][]byte) string {
			i := find(func(_ int, e events.Event) bool { return e.Type() == events.TypeKeyRotated })
			e := evs[i]
			r := e.Data.(events.KeyRotated)
			r.BodySHA256 = aggregate.BodyHash(`{"query":"something else"}`)
			e.Data = r
			(*lines)[i] = encode(e)
			return e.JobID
		}},
		{"gap", "an event of a job missing from the log", []string{aggregate.RuleGapless, aggregate.RuleConcurrentSend}, func(lines *[][]byte) string {
			// An unknown outcome that was followed by a resend of the
			// same key: losing it leaves the versions with a gap, and
			// the resend inside the first send's lease with no outcome.
			i := find(func(_ int, e events.Event) bool {
				o, ok := e.Data.(events.OutcomeClassified)
				return ok && o.Class == string(aggregate.ClassUnknown)
			})
			*lines = slices.Delete(*lines, i, i+1)
			return evs[i].JobID
		}},
	}
}

func jobOf(t *testing.T, payload string) string {
	c, err := engine.ParseCommand([]byte(payload))
	require.NoError(t, err)
	s, err := aggregate.NewSchedule(c, aggregate.DefaultPolicy(), "")
	require.NoError(t, err)
	return s.JobID
}

func jobOfKey(evs []events.Event, key string) string {
	for _, e := range evs {
		switch d := e.Data.(type) {
		case events.AttemptCreated:
			if d.Key == key {
				return e.JobID
			}
		case events.KeyRotated:
			if d.NewKey == key {
				return e.JobID
			}
		}
	}
	return ""
}

// waitAllTerminal waits until every job is finished and returns their
// states.
func waitAllTerminal(t *testing.T, js jetstream.JetStream, jobs []string) map[string]aggregate.State {
	t.Helper()
	st, err := snats.NewEventStore(context.Background(), js, snats.EventStoreOptions{})
	require.NoError(t, err)
	out := map[string]aggregate.State{}
	natstest.WaitFor(t, 2*time.Minute, func() error {
		for _, j := range jobs {
			evs, _, err := st.Load(context.Background(), j)
			if err != nil {
				return err
			}
			s := aggregate.Fold(evs)
			if !s.Status.Terminal() {
				return fmt.Errorf("job %s is %q", j, s.Status)
			}
			out[j] = s
		}
		return nil
	})
	return out
}

func writeLines(t *testing.T, name string, lines [][]byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(auditDir, name), append(bytes.Join(lines, []byte("\n")), '\n'), 0o644))
}

func writeLedger(t *testing.T, name string, entries []serper.LedgerEntry) {
	t.Helper()
	b, err := json.MarshalIndent(struct {
		Entries []serper.LedgerEntry `json:"entries"`
	}{entries}, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(auditDir, name), append(b, '\n'), 0o644))
}
