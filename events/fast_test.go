package events_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/serpent-engine/serpent/events"
)

// corpus is every message body the fast path tests start from: the
// golden events, a sample of every type, the recorded run of
// testdata/audit (its doctored copies hold the same lines) and a short
// log as the engine writes it, groups included.
func corpus(t testing.TB) [][]byte {
	var out [][]byte
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.json"))
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		out = append(out, bytes.TrimSpace(b))
	}
	for _, typ := range events.Types() {
		b, err := events.Encode(sampleEvent(samples()[typ], 3))
		require.NoError(t, err)
		out = append(out, b)
	}
	b, err := os.ReadFile("../testdata/audit/clean.jsonl")
	require.NoError(t, err)
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) > 0 {
			out = append(out, line)
		}
	}
	log, _ := benchLog(t, 12)
	return append(out, log...)
}

// variants are inputs the fast path must either read exactly as
// encoding/json or leave to it: the same body with white space, escapes,
// duplicates, nulls, other numbers, unknown members and trailing data.
func variants(b []byte) [][]byte {
	out := [][]byte{b}
	swaps := [][2]string{
		{`,"`, ` , "`},
		{`":`, `" :`},
		{`"schema":1`, `"schema":2`},
		{`"schema":1`, `"schema":1.0`},
		{`"schema":1`, `"schema":01`},
		{`"version":`, `"version":-`},
		{`"data":{`, `"data":{"extra":1,`},
		{`"data":{`, `"data":null,"x":{`},
		{`"key":"`, `"KEY":"`},
		{`"key":"`, `"key":"a","key":"`},
		{`"replayed":false`, `"replayed":null`},
		{`"result":`, `"result":null,"y":`},
		{`"entries":[`, `"entries":[{},`},
		{`"time":"2026`, `"time":"2026x`},
		{`"query":"`, `"query":"\u00e9\n`},
		{`"query":"`, `"query":"\ud83d\ude00`},
		{`"pages":`, `"pages":1e1,"p":`},
		{`"type":"`, `"type":"X`},
		{`}`, `}}`},
		{`},{`, `}`},
	}
	for _, s := range swaps {
		if bytes.Contains(b, []byte(s[0])) {
			out = append(out, bytes.Replace(b, []byte(s[0]), []byte(s[1]), 1))
		}
	}
	out = append(out, append(append([]byte{}, b...), " \n"...), append(append([]byte{}, b...), "x"...), b[:len(b)/2])
	return out
}

// sameAsJSON fails unless DecodeAll and DecodeAllLight read a message
// body as encoding/json alone does: the same events, or the same error.
func sameAsJSON(t *testing.T, b []byte) {
	t.Helper()
	want, werr := events.DecodeAllJSON(b)
	got, gerr := events.DecodeAll(b)
	light, lerr := events.DecodeAllLight(b)
	if werr != nil {
		require.Error(t, gerr, "%s", b)
		require.Equal(t, werr.Error(), gerr.Error(), "%s", b)
		require.Error(t, lerr, "%s", b)
		require.Equal(t, werr.Error(), lerr.Error(), "%s", b)
		return
	}
	require.NoError(t, gerr, "%s", b)
	require.Equal(t, want, got, "%s", b)
	require.NoError(t, lerr, "%s", b)
	for i := range want {
		want[i] = withoutResult(want[i])
	}
	require.Equal(t, want, light, "%s", b)
}

// TestFastPathMatchesJSON: for every input, the fast path and
// encoding/json agree on whether it is a message of events and on them.
func TestFastPathMatchesJSON(t *testing.T) {
	for _, b := range corpus(t) {
		for _, v := range variants(b) {
			sameAsJSON(t, v)
		}
	}
}

// TestFastPathReadsWhatEncodeWrites: the fast path reads every event as
// Encode writes it, of every type, without encoding/json.
func TestFastPathReadsWhatEncodeWrites(t *testing.T) {
	log, _ := benchLog(t, 12)
	for typ, p := range samples() {
		b, err := events.Encode(sampleEvent(p, 3))
		require.NoError(t, err)
		log = append(log, b)
		_, ok := events.DecodeFast(b)
		require.True(t, ok, typ)
	}
	for _, m := range log {
		parts, err := events.Split(m)
		require.NoError(t, err)
		for _, b := range parts {
			_, ok := events.DecodeFast(b)
			require.True(t, ok, "%s", b)
		}
	}
}

func withoutResult(e events.Event) events.Event {
	if o, ok := e.Data.(events.ObservationStored); ok {
		o.Result = nil
		e.Data = o
	}
	return e
}

func FuzzFastPathMatchesJSON(f *testing.F) {
	for i, b := range corpus(f) {
		if i%10 == 0 { // TestFastPathMatchesJSON covers every variant
			for _, v := range variants(b) {
				f.Add(v)
			}
		}
	}
	f.Fuzz(sameAsJSON)
}

// TestDecodeRefusesNullData: "data":null is no payload, on both paths.
func TestDecodeRefusesNullData(t *testing.T) {
	for _, typ := range []string{events.TypeJobScheduled, events.TypeObservationStored, events.TypeSent} {
		b := []byte(`{"type":"` + typ + `","schema":1,"id":"01M8VGW5R00000000000000002","job":"3f1c9a7e5b2d4c6e8a0b1c2d3e4f5a6b","version":2,"time":"2026-12-02T14:00:00Z","data":null}`)
		_, werr := events.DecodeJSON(b)
		require.ErrorIs(t, werr, events.ErrMalformed, typ)
		_, gerr := events.Decode(b)
		require.Error(t, gerr, typ)
		require.Equal(t, werr.Error(), gerr.Error())
		_, lerr := events.DecodeLight(b)
		require.Error(t, lerr, typ)
	}
}

// TestDecodeRoundTripsOddValues: every payload type, written by Encode
// with values the corpus does not hold (escapes, line separators, emoji,
// invalid UTF-8, a zone that is not UTC, negative and huge numbers, empty
// and nil lists, results that are not objects), reads back through Decode
// and DecodeLight as through encoding/json.
func TestDecodeRoundTripsOddValues(t *testing.T) {
	odd := "a<b>&c \u2028 \u2029 é 😀 \x7f \"q\" \\ / \t\n\x01 \xff\xfe"
	at := time.Date(2026, 12, 31, 23, 59, 59, 123456789, time.FixedZone("x", 5*3600+30*60))
	entry := events.LedgerEntry{RequestID: odd, Key: "k", Pages: 1, BilledPages: 2, AmountMicros: -1 << 62, At: at}
	payloads := []events.Payload{
		events.JobScheduled{Slot: at, Search: events.SearchContext{Query: odd, Country: "US", Language: "en", Device: "mobile", Limit: -1},
			Body: `{"query":"` + odd + `"}`, BodySHA256: "ab", Policy: events.RetryPolicy{BaseDelay: events.Duration(-time.Second),
				MaxDelay: events.Duration(1 << 62), MinDelay: 1, RetryAfterMax: events.Duration(90 * time.Minute), ReplayWindow: 1, SafetyMargin: 2, Lease: 3, MaxKeys: -9, MaxAge: 4},
			NotBefore: at, Account: odd, Priority: "p", Source: odd},
		events.AttemptCreated{Attempt: 1 << 40, Key: odd, BodySHA256: odd},
		events.Sent{Key: "k", Attempt: -1, Try: 0, Worker: odd, LeaseUntil: at, Deadline: time.Time{}},
		events.OutcomeClassified{Key: "k", Try: 1, Status: 599, Code: odd, Unknown: odd, RequestID: odd, Replayed: true,
			RetryAfter: events.Duration(1500 * time.Millisecond), Class: "c", Action: "a", Attempt: 2, Sends: 3, NextRunAt: at},
		events.KeyRotated{OldKey: "o", NewKey: "n", Attempt: 2, BodySHA256: "h", Reason: odd, NextRunAt: at},
		events.DeadlineReached{Key: "k", Deadline: at, Reason: odd},
		events.Reconciled{Keys: []string{}, RequestIDs: []string{odd, ""}, Entries: []events.LedgerEntry{entry, {}},
			Charges: 2, Verdict: "charged", Action: "x"},
		events.Reconciled{Keys: nil, Entries: []events.LedgerEntry{}, Verdict: "not_charged"},
		events.ObservationStored{Key: "k", RequestID: "r", Replayed: true, Pages: 0, Result: []byte(`{"a":"<b>\u00e9\ud83d\ude00","n":[1.5e300,-0,true,null,{}],"s":"` + "\u2028" + `"}`)},
		events.ObservationStored{Key: "k", Result: []byte(`"just a string"`)},
		events.ObservationStored{Key: "k", Result: []byte(`12`), CheckCharges: true},
		events.ChargesChecked{Key: odd, RequestIDs: []string{odd}, Entries: []events.LedgerEntry{entry, {}}, Charges: -1, Verdict: odd},
		events.ChargesChecked{Key: "k", RequestIDs: []string{}, Entries: []events.LedgerEntry{}},
		events.JobFailed{Reason: odd, Key: "k", Status: 401, Code: "c", Message: odd, RequestID: "r"},
		events.JobFailed{Reason: "r"},
		events.JobCancelled{By: odd, Reason: odd, Unresolved: "k"},
		events.RepurchaseAuthorized{By: odd, Reason: odd},
	}
	for i, p := range payloads {
		e := events.Event{ID: "01M8VGW5R00000000000000002", JobID: "3f1c9a7e5b2d4c6e8a0b1c2d3e4f5a6b", Version: uint64(i + 1), Time: at, Data: p}
		b, err := events.Encode(e)
		require.NoError(t, err)
		want, err := events.DecodeJSON(b)
		require.NoError(t, err, "%s", b)
		got, err := events.Decode(b)
		require.NoError(t, err, "%s", b)
		require.Equal(t, want, got, "%s", b)
		light, err := events.DecodeLight(b)
		require.NoError(t, err, "%s", b)
		require.Equal(t, withoutResult(want), light, "%s", b)
	}
}
