package serper

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// reply is what came back over HTTP, before anything is believed.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// identify decides whether a complete reply is the API's own and decodes it.
// It is pure (the clock is an argument) and never panics, whatever the bytes:
// FuzzDecodeReply holds it to that.
//
// A 200 is confirmed only with a success body (a JSON object with a request
// id, an organic array and a page count). Any other status is confirmed only
// with the JSON error envelope carrying a code and a request id. Anything
// else is unknown: a gateway page, an empty or plain-text body, a 200 that
// does not decode, a 2xx/3xx the contract does not have.
func identify(rp reply, now time.Time, scrub redactor) Result {
	res := decodeBody(rp)
	res.RawStatus = rp.status
	res.RetryAfter = parseRetryAfter(rp.header.Get(HeaderRetryAfter), now)
	if res.Confirmed {
		res.Status = rp.status
		res.Replayed = strings.EqualFold(strings.TrimSpace(rp.header.Get(HeaderReplayed)), "true")
	}
	res.Code = scrub.text(res.Code)
	res.Message = ClipMessage(scrub.text(res.Message))
	res.RequestID = scrub.text(res.RequestID)
	res.Fields = scrub.texts(res.Fields)
	res.Detail = scrub.text(res.Detail)
	if res.Search != nil {
		res.Search = scrub.json(res.Search)
	}
	return res
}

// MaxMessageBytes bounds the message of the API's error envelope that a
// Result keeps: it is for people, and the events that carry it must fit
// the log (a reply may be up to 4 MiB, a message of the log 1 MiB).
const MaxMessageBytes = 1 << 10

// ClipMessage is an API message cut to at most MaxMessageBytes (and an
// ellipsis) at a character's boundary. The client cuts after redaction,
// so that no half of a token is left.
func ClipMessage(s string) string {
	if len(s) <= MaxMessageBytes {
		return s
	}
	return strings.ToValidUTF8(s[:MaxMessageBytes], "") + "…"
}

func decodeBody(rp reply) Result {
	switch {
	case rp.status == http.StatusOK:
		return decodeSuccess(rp.body)
	case rp.status >= 400 && rp.status <= 599:
		return decodeEnvelope(rp)
	default:
		return unknown(UnknownUnexpectedReply, fmt.Sprintf("HTTP %d is not part of the API contract", rp.status))
	}
}

// successWire is the part of a success body the client relies on; pointers
// tell a missing field from a zero one.
type successWire struct {
	RequestID *string          `json:"requestId"`
	Organic   *[]organicObject `json:"organic"`
	Pages     *int             `json:"pages"`
}

// organicObject checks that an organic result is a JSON object without
// keeping a copy of it: the body is stored whole.
type organicObject struct{}

var errNotObject = errors.New("not an object")

func (*organicObject) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '{' {
		return errNotObject
	}
	return nil
}

func decodeSuccess(body []byte) Result {
	w, ok := scanSuccess(body)
	if !ok {
		w = successWire{}
		if err := json.Unmarshal(body, &w); err != nil {
			if errors.Is(err, errNotObject) {
				return unknown(UnknownUnexpectedReply, "200 whose organic["+strconv.Itoa(notObjectAt(body))+"] is not an object")
			}
			return unknown(jsonFailure(body, err), "200 whose body is not a success body: "+jsonProblem(err))
		}
	}
	switch {
	case w.RequestID == nil || !validRequestID(*w.RequestID):
		return unknown(UnknownUnexpectedReply, "200 without a valid requestId: not identified as the API's")
	case w.Organic == nil:
		return unknown(UnknownUnexpectedReply, "200 without an organic array")
	case w.Pages == nil || *w.Pages < 0:
		return unknown(UnknownUnexpectedReply, "200 without a non-negative pages count")
	}
	search := body
	if !compact(body) {
		var buf bytes.Buffer
		if err := json.Compact(&buf, body); err != nil {
			return unknown(UnknownUnexpectedReply, "200 whose body does not compact: "+jsonProblem(err))
		}
		search = buf.Bytes()
	}
	return Result{Confirmed: true, RequestID: *w.RequestID, Search: search, Pages: *w.Pages}
}

// notObjectAt is the index of the first organic result that is not an
// object, in a body whose decoding found one.
func notObjectAt(body []byte) int {
	var w struct {
		Organic []json.RawMessage `json:"organic"`
	}
	_ = json.Unmarshal(body, &w)
	for i, item := range w.Organic {
		if t := bytes.TrimSpace(item); len(t) == 0 || t[0] != '{' {
			return i
		}
	}
	return len(w.Organic)
}

// compact reports whether a valid JSON document has no space to leave out
// outside its strings, so json.Compact would return it unchanged.
func compact(doc []byte) bool {
	in := false
	for i := 0; i < len(doc); i++ {
		switch c := doc[i]; {
		case in && c == '\\':
			i++
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

// envelopeWire is the API's error envelope.
type envelopeWire struct {
	Error *struct {
		Code      *string         `json:"code"`
		Message   json.RawMessage `json:"message"`
		RequestID *string         `json:"requestId"`
		Fields    json.RawMessage `json:"fields"`
	} `json:"error"`
}

func decodeEnvelope(rp reply) Result {
	var w envelopeWire
	err := json.Unmarshal(rp.body, &w)
	ok := err == nil && w.Error != nil && w.Error.Code != nil && validCode(*w.Error.Code) &&
		w.Error.RequestID != nil && validRequestID(*w.Error.RequestID)
	if !ok {
		return notEnvelope(rp, err)
	}
	res := Result{Confirmed: true, Code: *w.Error.Code, RequestID: *w.Error.RequestID}
	// Message and fields are for people; a malformed one does not make the
	// status any less the API's.
	var msg string
	if json.Unmarshal(w.Error.Message, &msg) == nil {
		res.Message = msg
	}
	var fields []string
	if json.Unmarshal(w.Error.Fields, &fields) == nil {
		res.Fields = fields
	}
	return res
}

// notEnvelope names why a non-2xx reply was not identified.
func notEnvelope(rp reply, err error) Result {
	ct := strings.ToLower(rp.header.Get("Content-Type"))
	switch {
	case strings.Contains(ct, "html") || looksLikeHTML(rp.body):
		return unknown(UnknownGatewayPage, fmt.Sprintf("HTTP %d with an HTML page, not the API's error envelope", rp.status))
	case rp.status == http.StatusBadGateway || rp.status == http.StatusServiceUnavailable || rp.status == http.StatusGatewayTimeout:
		return unknown(UnknownGatewayPage, fmt.Sprintf("HTTP %d without the API's error envelope", rp.status))
	case err != nil && len(bytes.TrimSpace(rp.body)) > 0 && jsonFailure(rp.body, err) == UnknownTruncatedBody:
		return unknown(UnknownTruncatedBody, fmt.Sprintf("HTTP %d with cut-off JSON", rp.status))
	}
	return unknown(UnknownUnexpectedReply, fmt.Sprintf("HTTP %d without the API's error envelope (code and requestId)", rp.status))
}

func looksLikeHTML(body []byte) bool {
	head := bytes.ToLower(bytes.TrimSpace(body[:min(len(body), 512)]))
	return bytes.HasPrefix(head, []byte("<!doctype html")) || bytes.HasPrefix(head, []byte("<html")) ||
		bytes.Contains(head, []byte("<head")) || bytes.Contains(head, []byte("<body"))
}

// jsonFailure tells cut-off JSON from JSON that is simply not the API's.
func jsonFailure(body []byte, err error) string {
	var syn *json.SyntaxError
	if len(bytes.TrimSpace(body)) > 0 && errors.As(err, &syn) && strings.Contains(syn.Error(), "unexpected end") {
		return UnknownTruncatedBody
	}
	return UnknownUnexpectedReply
}

// jsonProblem shortens a decoding error for Result.Detail without quoting
// the body back.
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q has the wrong JSON type", typ.Field)
	}
	return "not JSON"
}

// validRequestID accepts the ids the API hands out: short, printable, no
// spaces, no commas (the ledger takes lists of ids split at commas, so an
// id holding one could never be looked up). Anything else was not written
// by the API.
func validRequestID(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == ',' {
			return false
		}
	}
	return true
}

// validCode accepts snake_case codes such as search_timeout.
func validCode(s string) bool {
	if s == "" || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

// maxRetryAfter bounds a server's Retry-After: a day is already absurd.
const maxRetryAfter = 24 * time.Hour

// parseRetryAfter reads delay-seconds or an HTTP date; junk reads as 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	secs, err := strconv.ParseUint(v, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return maxRetryAfter // all digits, too many for a uint64: capped, not ignored
	case err == nil && secs > uint64(maxRetryAfter/time.Second):
		return maxRetryAfter
	case err == nil:
		return time.Duration(secs) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(t.Sub(now), 0), maxRetryAfter)
}
