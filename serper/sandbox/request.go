package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"sort"
	"strings"
	"unicode/utf8"
)

// searchParams is a validated, normalised search request.
type searchParams struct {
	Query    string `json:"query"`
	Country  string `json:"country"`
	Language string `json:"language"`
	Device   string `json:"device"`
	Limit    int    `json:"limit"`
}

// maxQueryLen is the longest query the API takes, in characters.
const maxQueryLen = 2048

// invalidRequest lists the fields of a 422 and why each is wrong.
type invalidRequest struct {
	fields  []string
	reasons []string
}

func (e *invalidRequest) add(field, reason string) {
	e.fields = append(e.fields, field)
	e.reasons = append(e.reasons, field+" "+reason)
}

func (e *invalidRequest) Error() string { return "invalid request: " + strings.Join(e.reasons, "; ") }

// parseSearch validates a search body and applies the defaults (country US,
// language en, device desktop, limit 10). It reports every bad field.
func parseSearch(contentType string, body []byte) (searchParams, *invalidRequest) {
	bad := &invalidRequest{}
	if mt, _, err := mime.ParseMediaType(contentType); err != nil || mt != "application/json" {
		bad.add("Content-Type", "must be application/json")
		return searchParams{}, bad
	}
	var raw map[string]json.RawMessage
	if err := decodeStrict(body, &raw); err != nil || raw == nil {
		bad.add("body", "must be one JSON object")
		return searchParams{}, bad
	}
	p := searchParams{Country: "US", Language: "en", Device: "desktop", Limit: 10}
	if q, ok := raw["query"]; !ok || json.Unmarshal(q, &p.Query) != nil || strings.TrimSpace(p.Query) == "" {
		bad.add("query", "must be a non-empty string")
	} else if utf8.RuneCountInString(p.Query) > maxQueryLen || !utf8.ValidString(p.Query) {
		bad.add("query", fmt.Sprintf("must be valid text of at most %d characters", maxQueryLen))
	}
	if v, ok := raw["country"]; ok && (json.Unmarshal(v, &p.Country) != nil || !letters(p.Country, false)) {
		bad.add("country", "must be a 2-letter country code such as US")
	}
	p.Country = strings.ToUpper(p.Country)
	if v, ok := raw["language"]; ok && (json.Unmarshal(v, &p.Language) != nil || !letters(p.Language, true)) {
		bad.add("language", "must be a 2-letter lowercase language code such as en")
	}
	if v, ok := raw["device"]; ok && (json.Unmarshal(v, &p.Device) != nil || (p.Device != "desktop" && p.Device != "mobile")) {
		bad.add("device", "must be desktop or mobile")
	}
	if v, ok := raw["limit"]; ok && (json.Unmarshal(v, &p.Limit) != nil || p.Limit < 1 || p.Limit > 100) {
		bad.add("limit", "must be an integer from 1 to 100")
	}
	var unknown []string
	for name := range raw {
		switch name {
		case "query", "country", "language", "device", "limit":
		default:
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		bad.add(name, "is not a known field")
	}
	if len(bad.fields) > 0 {
		return searchParams{}, bad
	}
	return p, nil
}

// letters reports whether s is exactly two ASCII letters (lowercase if asked).
func letters(s string, lower bool) bool {
	if len(s) != 2 {
		return false
	}
	for i := 0; i < 2; i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z') && (lower || !(c >= 'A' && c <= 'Z')) {
			return false
		}
	}
	return true
}

// decodeStrict decodes exactly one JSON value with no unknown fields.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
