package serper

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fuzzToken is planted in the fuzzer's bodies by the seeds; it must never
// come out of identify.
const fuzzToken = "fuzz_TOKEN_must_not_leak"

// FuzzDecodeReply holds identify to its promises on any input: it never
// panics, a Result is either confirmed (with a request id) or unknown (with
// a reason), a confirmed 200 carries valid, compact JSON, and the token
// never leaks.
// The corpus starts from the captured replies in testdata/api.
func FuzzDecodeReply(f *testing.F) {
	files, err := os.ReadDir(fixtures)
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		body, err := os.ReadFile(filepath.Join(fixtures, file.Name()))
		if err != nil {
			f.Fatal(err)
		}
		status, _ := strconv.Atoi(strings.SplitN(file.Name(), "_", 2)[0])
		f.Add(status, "application/json", "", "", body)
		f.Add(status, "text/html", "120", "true", body)
	}
	f.Add(200, "application/json", "Wed, 21 Oct 2015 07:28:00 GMT", "true",
		[]byte(`{"requestId":"req_1","organic":[{"t":"`+fuzzToken+`"}],"pages":1}`))
	f.Add(401, "", "", "", []byte(`{"error":{"code":"unauthorized","message":"Bearer `+fuzzToken+`","requestId":"req_1"}}`))
	f.Add(200, "", "", "", []byte(`{"requestId":"req_1","organic":[],"pages":0,"x":"\u0066uzz_TOKEN_must_not_leak"}`))
	f.Add(502, "", "", "", []byte{})

	f.Fuzz(func(t *testing.T, status int, contentType, retryAfter, replayed string, body []byte) {
		h := http.Header{}
		h.Set("Content-Type", contentType)
		h.Set("Retry-After", retryAfter)
		h.Set("Idempotent-Replayed", replayed)
		got := identify(reply{status: status, header: h, body: body}, t0, redactor{secret: fuzzToken})

		if got.Confirmed {
			if got.Unknown != "" || got.Status != status || !validRequestID(got.RequestID) {
				t.Fatalf("confirmed result is inconsistent: %+v", got)
			}
			if status == 200 && (!json.Valid(got.Search) || got.Pages < 0 || got.Code != "") {
				t.Fatalf("confirmed 200 without a valid body: %+v", got)
			}
			if status == 200 && !compact(got.Search) {
				t.Fatalf("confirmed 200 whose stored body is not compact: %s", got.Search)
			}
			if status != 200 && (got.Code == "" || got.Search != nil) {
				t.Fatalf("confirmed error without a code: %+v", got)
			}
		} else if got.Unknown == "" || got.Status != 0 || got.Code != "" || got.RequestID != "" || got.Replayed || got.Search != nil {
			t.Fatalf("unknown result is inconsistent: %+v", got)
		}
		if got.RetryAfter < 0 || got.RetryAfter > maxRetryAfter {
			t.Fatalf("retry after out of range: %v", got.RetryAfter)
		}
		for _, s := range append([]string{got.Code, got.Message, got.RequestID, got.Detail, string(got.Search)}, got.Fields...) {
			if strings.Contains(s, fuzzToken) {
				t.Fatalf("token leaked: %q", s)
			}
		}
		if got.Search != nil {
			// Decoded and encoded again, escapes are gone: \u0066 is f again.
			var v any
			if err := json.Unmarshal(got.Search, &v); err != nil {
				t.Fatalf("search body does not decode: %v", err)
			}
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if enc.Encode(v) == nil && bytes.Contains(b.Bytes(), []byte(fuzzToken)) {
				t.Fatalf("escaped token leaked: %s", got.Search)
			}
		}
	})
}
