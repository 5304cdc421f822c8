package projections_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
	"github.com/stretchr/testify/require"
)

// corpus is every encoded event the decoder tests start from: the golden
// events, the sample log, and the recorded run of testdata/audit (its
// doctored copies hold the same lines).
func corpus(t testing.TB) [][]byte {
	var out [][]byte
	files, err := filepath.Glob("../testdata/events/*.json")
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		out = append(out, bytes.TrimSpace(b))
	}
	for _, r := range interleave(sampleLog(t)) {
		b, err := events.Encode(r.Event)
		require.NoError(t, err)
		out = append(out, b)
	}
	if b, err := os.ReadFile("../testdata/audit/clean.jsonl"); err == nil {
		for _, line := range bytes.Split(b, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 {
				out = append(out, line)
			}
		}
	}
	return out
}

// variants are inputs the fast path must either read exactly as the codec
// or leave to it: the same event with white space, escapes, duplicates,
// nulls, other numbers, unknown members and trailing data.
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
		{`"time":"2026`, `"time":"2026x`},
		{`"query":"`, `"query":"\u00e9\n`},
		{`"query":"`, `"query":"\ud83d\ude00`},
		{`"pages":`, `"pages":1e1,"p":`},
		{`"type":"`, `"type":"X`},
		{`}`, `}}`},
	}
	for _, s := range swaps {
		if bytes.Contains(b, []byte(s[0])) {
			out = append(out, bytes.Replace(b, []byte(s[0]), []byte(s[1]), 1))
		}
	}
	out = append(out, append(append([]byte{}, b...), " \n"...), append(append([]byte{}, b...), "x"...), b[:len(b)/2])
	return out
}

// TestDecodeMatchesCodec: for every input, Decode and events.Decode agree
// on whether it is an event and on the event.
func TestDecodeMatchesCodec(t *testing.T) {
	for _, b := range corpus(t) {
		for _, v := range variants(b) {
			want, werr := events.Decode(v)
			got, gerr := projections.Decode(v)
			if werr != nil {
				require.Error(t, gerr, "%s", v)
				require.Equal(t, werr.Error(), gerr.Error())
				continue
			}
			require.NoError(t, gerr, "%s", v)
			require.Equal(t, want, got, "%s", v)
			light, err := projections.DecodeLight(v)
			require.NoError(t, err)
			require.Equal(t, withoutResult(want), light)
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

func FuzzDecodeMatchesCodec(f *testing.F) {
	for i, b := range corpus(f) {
		if i%10 == 0 { // TestDecodeMatchesCodec covers every variant
			for _, v := range variants(b) {
				f.Add(v)
			}
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := events.Decode(b)
		got, gerr := projections.Decode(b)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("codec error %v, fast error %v for %q", werr, gerr, b)
		}
		if werr == nil {
			require.Equal(t, want, got)
		}
		light, lerr := projections.DecodeLight(b)
		if (werr == nil) != (lerr == nil) {
			t.Fatalf("codec error %v, light error %v for %q", werr, lerr, b)
		}
		if werr == nil {
			require.Equal(t, withoutResult(want), light)
		}
	})
}

// BenchmarkDecode compares the fast path with the codec on the sample log.
func BenchmarkDecode(b *testing.B) {
	var log [][]byte
	for _, r := range interleave(sampleLog(b)) {
		enc, err := events.Encode(r.Event)
		require.NoError(b, err)
		log = append(log, enc)
	}
	for _, tc := range []struct {
		name   string
		decode func([]byte) (events.Event, error)
	}{{"codec", events.Decode}, {"fast", projections.Decode}, {"light", projections.DecodeLight}} {
		b.Run(tc.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				if _, err := tc.decode(log[n%len(log)]); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// TestDecodeRefusesNullData: "data":null is no payload, for both decoders.
func TestDecodeRefusesNullData(t *testing.T) {
	for _, typ := range []string{events.TypeJobScheduled, events.TypeObservationStored, events.TypeSent} {
		b := []byte(`{"type":"` + typ + `","schema":1,"id":"01M8VGW5R00000000000000002","job":"3f1c9a7e5b2d4c6e8a0b1c2d3e4f5a6b","version":2,"time":"2026-12-02T14:00:00Z","data":null}`)
		_, werr := events.Decode(b)
		require.ErrorIs(t, werr, events.ErrMalformed, typ)
		_, gerr := projections.Decode(b)
		require.Error(t, gerr, typ)
		require.Equal(t, werr.Error(), gerr.Error())
		_, lerr := projections.DecodeLight(b)
		require.Error(t, lerr, typ)
	}
}

// TestDecodeRoundTripsOddValues: every payload type, written by
// events.Encode with values the corpus does not hold (escapes, line
// separators, emoji, invalid UTF-8, a zone that is not UTC, negative and
// huge numbers, empty and nil lists, results that are not objects), reads
// back through Decode and DecodeLight as through events.Decode.
func TestDecodeRoundTripsOddValues(t *testing.T) {
	odd := "a<b>&c \u2028 \u2029 é 😀 \x7f \"q\" \\ / \t\n\x01 \xff\xfe"
	at := time.Date(2026, 12, 31, 23, 59, 59, 123456789, time.FixedZone("x", 5*3600+30*60))
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
		events.Reconciled{Keys: []string{}, RequestIDs: []string{odd, ""}, Entries: []events.LedgerEntry{{RequestID: odd, Key: "k", Pages: 1, BilledPages: 2, AmountMicros: -1 << 62, At: at}, {}},
			Charges: 2, Verdict: "charged", Action: "x"},
		events.Reconciled{Keys: nil, Entries: []events.LedgerEntry{}, Verdict: "not_charged"},
		events.ObservationStored{Key: "k", RequestID: "r", Replayed: true, Pages: 0, Result: []byte(`{"a":"<b>\u00e9\ud83d\ude00","n":[1.5e300,-0,true,null,{}],"s":"` + "\u2028" + `"}`)},
		events.ObservationStored{Key: "k", Result: []byte(`"just a string"`)},
		events.ObservationStored{Key: "k", Result: []byte(`12`)},
		events.JobFailed{Reason: odd, Key: "k", Status: 401, Code: "c", Message: odd, RequestID: "r"},
		events.JobFailed{Reason: "r"},
		events.JobCancelled{By: odd, Reason: odd, Unresolved: "k"},
		events.RepurchaseAuthorized{By: odd, Reason: odd},
	}
	for i, p := range payloads {
		e := events.Event{ID: "01M8VGW5R00000000000000002", JobID: "3f1c9a7e5b2d4c6e8a0b1c2d3e4f5a6b", Version: uint64(i + 1), Time: at, Data: p}
		b, err := events.Encode(e)
		require.NoError(t, err)
		want, err := events.Decode(b)
		require.NoError(t, err, "%s", b)
		got, err := projections.Decode(b)
		require.NoError(t, err, "%s", b)
		require.Equal(t, want, got, "%s", b)
		light, err := projections.DecodeLight(b)
		require.NoError(t, err, "%s", b)
		require.Equal(t, withoutResult(want), light, "%s", b)
	}
}
