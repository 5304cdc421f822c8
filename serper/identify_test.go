package serper

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// fixtures are replies captured from the sandbox (see sandbox's golden test).
const fixtures = "../testdata/api"

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	require.NoError(t, err)
	return b
}

func TestIdentifyFixtures(t *testing.T) {
	tests := []struct {
		file   string
		status int
		want   Result // Search and Message are not compared
	}{
		{"200_success.json", 200, Result{Confirmed: true, Status: 200, RequestID: "req_532deabf88729cb43995ab5a", Pages: 1}},
		{"200_zero_results.json", 200, Result{Confirmed: true, Status: 200, RequestID: "req_8c7654ecfd7b0b623b803e2f"}},
		{"401_unauthorized.json", 401, Result{Confirmed: true, Status: 401, Code: CodeUnauthorized, RequestID: "req_84acc16af38f59d2ddeb0047"}},
		{"422_invalid_request.json", 422, Result{Confirmed: true, Status: 422, Code: CodeInvalidRequest, RequestID: "req_adf21c0341a4dfca3200c266",
			Fields: []string{"query", "country", "limit", "page"}}},
		{"408_search_timeout.json", 408, Result{Confirmed: true, Status: 408, Code: CodeSearchTimeout, RequestID: "req_9df764a92c8768b0163e7b64"}},
		{"424_upstream_failed.json", 424, Result{Confirmed: true, Status: 424, Code: CodeUpstreamFailed, RequestID: "req_460e144feb894b153ea4f5a1"}},
		{"503_service_unavailable.json", 503, Result{Confirmed: true, Status: 503, Code: CodeServiceUnavailable, RequestID: "req_37c02559b74fdab168e5d2d3"}},
		{"503_billing_unavailable.json", 503, Result{Confirmed: true, Status: 503, Code: CodeBillingUnavailable, RequestID: "req_22db33e560859d948f9c714d"}},
		{"409_idempotency_in_progress.json", 409, Result{Confirmed: true, Status: 409, Code: CodeIdempotencyInProgress, RequestID: "req_b8c9c02b928abcf37a5af402"}},
		{"409_idempotency_replay_unavailable.json", 409, Result{Confirmed: true, Status: 409, Code: CodeIdempotencyReplayUnavailable, RequestID: "req_d879d55d657da31d6993392f"}},
		{"429_rate_limited.json", 429, Result{Confirmed: true, Status: 429, Code: CodeRateLimited, RequestID: "req_09f26ac699747ca2f13c82f6"}},
		{"502_gateway.html", 502, Result{Unknown: UnknownGatewayPage}},
		{"504_gateway.html", 504, Result{Unknown: UnknownGatewayPage}},
		{"ledger_entries.json", 200, Result{Unknown: UnknownUnexpectedReply}},
		// The same bodies under statuses they do not belong to.
		{"200_success.json", 502, Result{Unknown: UnknownGatewayPage}},
		{"200_success.json", 201, Result{Unknown: UnknownUnexpectedReply}},
		{"408_search_timeout.json", 200, Result{Unknown: UnknownUnexpectedReply}},
		{"504_gateway.html", 200, Result{Unknown: UnknownUnexpectedReply}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			got := identify(reply{status: tt.status, header: http.Header{}, body: fixture(t, tt.file)}, t0, redactor{})
			require.Equal(t, tt.status, got.RawStatus)
			require.Equal(t, tt.want.Confirmed, got.Confirmed)
			require.Equal(t, tt.want.Status, got.Status)
			require.Equal(t, tt.want.Code, got.Code)
			require.Equal(t, tt.want.RequestID, got.RequestID)
			require.Equal(t, tt.want.Unknown, got.Unknown)
			require.Equal(t, tt.want.Pages, got.Pages)
			require.Equal(t, tt.want.Fields, got.Fields)
			if got.Confirmed {
				require.Equal(t, got.Status != 200, got.Message != "")
				require.Empty(t, got.Detail)
			} else {
				require.NotEmpty(t, got.Detail)
			}
			if got.OK() {
				require.True(t, json.Valid(got.Search))
				require.JSONEq(t, string(fixture(t, tt.file)), string(got.Search))
			} else {
				require.Nil(t, got.Search)
			}
		})
	}
}

func TestIdentifyEdgeCases(t *testing.T) {
	ok := `{"requestId":"req_1","organic":[{"position":1}],"pages":1}`
	tests := []struct {
		name      string
		status    int
		header    http.Header
		body      string
		confirmed bool
		unknown   string
	}{
		{"success", 200, nil, ok, true, ""},
		{"success with spaces and extra fields", 200, nil, " {\n\"requestId\": \"req_1\", \"organic\": [], \"pages\": 0, \"new\": {\"x\": 1}}\n", true, ""},
		{"empty 200", 200, nil, "", false, UnknownUnexpectedReply},
		{"200 cut off", 200, nil, ok[:30], false, UnknownTruncatedBody},
		{"200 without request id", 200, nil, `{"organic":[],"pages":0}`, false, UnknownUnexpectedReply},
		{"200 with empty request id", 200, nil, `{"requestId":"","organic":[],"pages":0}`, false, UnknownUnexpectedReply},
		{"200 with request id of spaces", 200, nil, `{"requestId":"req 1","organic":[],"pages":0}`, false, UnknownUnexpectedReply},
		{"200 with numeric request id", 200, nil, `{"requestId":1,"organic":[],"pages":0}`, false, UnknownUnexpectedReply},
		// The ledger takes lists of ids split at commas: an id holding one
		// could never be looked up, and its job could not be reconciled.
		{"200 with a comma in the request id", 200, nil, `{"requestId":"req_7,a","organic":[],"pages":0}`, false, UnknownUnexpectedReply},
		{"envelope with a comma in the request id", 409, nil, `{"error":{"code":"idempotency_replay_unavailable","requestId":"req_7,a"}}`, false, UnknownUnexpectedReply},
		{"200 without organic", 200, nil, `{"requestId":"req_1","pages":0}`, false, UnknownUnexpectedReply},
		{"200 with null organic", 200, nil, `{"requestId":"req_1","organic":null,"pages":0}`, false, UnknownUnexpectedReply},
		{"200 with organic of strings", 200, nil, `{"requestId":"req_1","organic":["x"],"pages":1}`, false, UnknownUnexpectedReply},
		{"200 without pages", 200, nil, `{"requestId":"req_1","organic":[]}`, false, UnknownUnexpectedReply},
		{"200 with negative pages", 200, nil, `{"requestId":"req_1","organic":[],"pages":-1}`, false, UnknownUnexpectedReply},
		{"200 with fractional pages", 200, nil, `{"requestId":"req_1","organic":[],"pages":1.5}`, false, UnknownUnexpectedReply},
		{"200 with trailing data", 200, nil, ok + `{}`, false, UnknownUnexpectedReply},
		{"200 array", 200, nil, `[]`, false, UnknownUnexpectedReply},
		{"200 html", 200, nil, `<html>ok</html>`, false, UnknownUnexpectedReply},
		{"envelope", 408, nil, `{"error":{"code":"search_timeout","message":"m","requestId":"req_1"}}`, true, ""},
		{"envelope of a code we do not know", 418, nil, `{"error":{"code":"teapot","requestId":"req_1"}}`, true, ""},
		{"envelope with odd message and fields", 422, nil, `{"error":{"code":"invalid_request","message":7,"fields":"query","requestId":"req_1"}}`, true, ""},
		{"envelope without request id", 503, nil, `{"error":{"code":"service_unavailable","message":"m"}}`, false, UnknownGatewayPage},
		{"envelope without code", 408, nil, `{"error":{"message":"m","requestId":"req_1"}}`, false, UnknownUnexpectedReply},
		{"envelope with a code that is not snake_case", 408, nil, `{"error":{"code":"Search Timeout","requestId":"req_1"}}`, false, UnknownUnexpectedReply},
		{"proxy json", 429, nil, `{"message":"Too Many Requests"}`, false, UnknownUnexpectedReply},
		{"envelope cut off", 409, nil, `{"error":{"code":"idempotency_in_progress","requestId":"req_1"`, false, UnknownTruncatedBody},
		{"empty 502", 502, nil, ``, false, UnknownGatewayPage},
		{"plain text 504", 504, nil, `upstream request timeout`, false, UnknownGatewayPage},
		{"plain text 500", 500, nil, `Internal Server Error`, false, UnknownUnexpectedReply},
		{"html 500 by content type", 500, http.Header{"Content-Type": {"text/html; charset=utf-8"}}, `oops`, false, UnknownGatewayPage},
		{"html 403 by content", 403, nil, "\n<!DOCTYPE html><title>Forbidden</title>", false, UnknownGatewayPage},
		{"204", 204, nil, ``, false, UnknownUnexpectedReply},
		{"redirect", 302, http.Header{"Location": {"https://elsewhere"}}, ``, false, UnknownUnexpectedReply},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = http.Header{}
			}
			got := identify(reply{status: tt.status, header: h, body: []byte(tt.body)}, t0, redactor{})
			require.Equal(t, tt.confirmed, got.Confirmed, "%+v", got)
			require.Equal(t, tt.unknown, got.Unknown, "%+v", got)
			if !got.Confirmed {
				require.Zero(t, got.Status)
				require.Empty(t, got.Code)
				require.Empty(t, got.RequestID)
			}
		})
	}
}

func TestIdentifyHeaders(t *testing.T) {
	envelope := []byte(`{"error":{"code":"rate_limited","requestId":"req_1"}}`)
	tests := []struct {
		name       string
		status     int
		body       []byte
		header     http.Header
		replayed   bool
		retryAfter time.Duration
	}{
		{"replayed", 429, envelope, http.Header{"Idempotent-Replayed": {"true"}}, true, 0},
		{"replayed, any case", 429, envelope, http.Header{"Idempotent-Replayed": {" TRUE "}}, true, 0},
		{"not replayed", 429, envelope, http.Header{"Idempotent-Replayed": {"false"}}, false, 0},
		{"replayed on a gateway page means nothing", 502, nil, http.Header{"Idempotent-Replayed": {"true"}}, false, 0},
		{"retry after seconds", 429, envelope, http.Header{"Retry-After": {"7"}}, false, 7 * time.Second},
		{"retry after date", 429, envelope, http.Header{"Retry-After": {t0.Add(90 * time.Second).Format(http.TimeFormat)}}, false, 90 * time.Second},
		{"retry after past date", 429, envelope, http.Header{"Retry-After": {t0.Add(-time.Hour).Format(http.TimeFormat)}}, false, 0},
		{"retry after huge", 429, envelope, http.Header{"Retry-After": {"99999999999999999"}}, false, 24 * time.Hour},
		{"retry after too long for a uint64 is capped too", 429, envelope, http.Header{"Retry-After": {"999999999999999999999999"}}, false, 24 * time.Hour},
		{"retry after negative", 429, envelope, http.Header{"Retry-After": {"-5"}}, false, 0},
		{"retry after junk", 429, envelope, http.Header{"Retry-After": {"soon"}}, false, 0},
		{"retry after on a gateway page", 503, []byte("<html></html>"), http.Header{"Retry-After": {"3"}}, false, 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := identify(reply{status: tt.status, header: tt.header, body: tt.body}, t0, redactor{})
			require.Equal(t, tt.replayed, got.Replayed)
			require.Equal(t, tt.retryAfter, got.RetryAfter)
		})
	}
}

func TestIdentifyScrubsTheToken(t *testing.T) {
	const token = "sk_live_RECOGNISABLE_0123456789"
	scrub := redactor{secret: token}
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"echo in message", 401, `{"error":{"code":"unauthorized","message":"bad token Bearer ` + token + `","requestId":"req_1","fields":["` + token + `"]}}`},
		{"echo in success body", 200, `{"requestId":"req_1","organic":[{"title":"` + token + `"}],"pages":1,"debug":{"auth":"Bearer ` + token + `"}}`},
		{"escaped echo in success body", 200, `{"requestId":"req_1","organic":[{"title":"\u0073k_live_RECOGNISABLE_0123456789"}],"pages":1}`},
		{"escaped slash", 200, `{"requestId":"req_1","organic":[],"pages":0,"a":"sk_live_RECOGNISABLE\/x","b":"\u0073k_live_RECOGNISABLE_0123456789"}`},
		{"escaped upper-case hex", 200, `{"requestId":"req_1","organic":[],"pages":0,"a":"\u0053K"}`},
		{"escaped mid-token", 200, `{"requestId":"req_1","organic":[],"pages":0,"a":"sk_live_REC\u004fGNISABLE_0123456789 \"quoted\""}`},
		{"echo in request id", 409, `{"error":{"code":"idempotency_in_progress","requestId":"` + token + `"}}`},
		{"echo in a gateway page", 502, `<html>Authorization: Bearer ` + token + `</html>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := identify(reply{status: tt.status, header: http.Header{}, body: []byte(tt.body)}, t0, scrub)
			requireNoToken(t, token, got)
			if got.Search != nil {
				require.True(t, json.Valid(got.Search), "%s", got.Search)
			}
		})
	}
}

// TestScrubLeavesHarmlessEscapesAlone: escapes that cannot spell a
// character of the token (quotes, an ampersand) leave a reply's bytes as
// they came; one that can sends it through the decoder.
func TestScrubLeavesHarmlessEscapesAlone(t *testing.T) {
	scrub := redactor{secret: "sk_live_RECOGNISABLE_0123456789"}
	for _, doc := range []string{
		`{"b":"say \"espresso\" \u0026 more","a":"caf\u00e9\n\t\\u0073"}`,
		`{"b":1,"a":"no escapes"}`,
	} {
		require.Equal(t, doc, string(scrub.json([]byte(doc))), "not decoded and encoded again")
		require.False(t, scrub.mayHide([]byte(doc)))
	}
	for _, doc := range []string{`"\u0073"`, `"\u005F"`, `"\u00"`, `"\x"`} {
		require.True(t, scrub.mayHide([]byte(doc)), doc)
	}
	slashed := redactor{secret: "tok/en"}
	require.True(t, slashed.mayHide([]byte(`"tok\/en"`)))
	require.Equal(t, `{"a":"[redacted]"}`, string(slashed.json([]byte(`{"a":"tok\/en"}`))))
	accented := redactor{secret: "clé"}
	require.True(t, accented.mayHide([]byte(`"cl\u00e9"`)))
}

// TestSuccessBodyStoredCompact: a compact body is stored as it came, a
// spaced one compacted; a result that is not an object is named.
func TestSuccessBodyStoredCompact(t *testing.T) {
	body := `{"requestId":"req_1","organic":[{"title":"a b"},{"title":"c"}],"pages":1}`
	got := decodeSuccess([]byte(body))
	require.True(t, got.Confirmed)
	require.Equal(t, body, string(got.Search))

	spaced := "{\n  \"requestId\": \"req_1\",\n  \"organic\": [ {\"title\": \"a b\"}, {\"title\":\"c\"} ],\r\n\t\"pages\": 1 }"
	got = decodeSuccess([]byte(spaced))
	require.True(t, got.Confirmed)
	require.Equal(t, body, string(got.Search))

	got = decodeSuccess([]byte(`{"requestId":"req_1","organic":[{},{}, 3,{}],"pages":1}`))
	require.False(t, got.Confirmed)
	require.Contains(t, got.Detail, "organic[2] is not an object")

	for _, doc := range []string{`{"a":"x y"}`, `{"a":"\" "}`, `[1,"\\",2]`} {
		require.True(t, compact([]byte(doc)), doc)
	}
	for _, doc := range []string{`{"a": 1}`, "[1,\n2]", `{"a":"\\" ,"b":1}`} {
		require.False(t, compact([]byte(doc)), doc)
	}
}

// TestIdentifyClipsALongMessage: the envelope's message is kept to
// MaxMessageBytes, cut at a character's boundary after the token is
// scrubbed (a token across the cut leaves none of itself), and the reply
// is the API's all the same.
func TestIdentifyClipsALongMessage(t *testing.T) {
	const token = "sk_live_RECOGNISABLE_0123456789"
	long := strings.Repeat("é", MaxMessageBytes/2-4) + "Bearer " + token + strings.Repeat("x", 4<<20)
	body, err := json.Marshal(map[string]any{"error": map[string]any{"code": "invalid_request", "requestId": "req_1", "message": long}})
	require.NoError(t, err)
	got := identify(reply{status: 400, header: http.Header{}, body: body}, t0, redactor{secret: token})
	require.True(t, got.Confirmed)
	require.Equal(t, "invalid_request", got.Code)
	require.LessOrEqual(t, len(got.Message), MaxMessageBytes+len("…"))
	require.True(t, utf8.ValidString(got.Message))
	require.True(t, strings.HasSuffix(got.Message, "…"))
	require.NotContains(t, got.Message, "sk_live")
	requireNoToken(t, token, got)

	short := identify(reply{status: 400, header: http.Header{}, body: []byte(`{"error":{"code":"invalid_request","requestId":"req_1","message":"bad query"}}`)}, t0, redactor{})
	require.Equal(t, "bad query", short.Message, "a short message is kept whole")
}
