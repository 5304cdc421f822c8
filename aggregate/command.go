package aggregate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/serpent-engine/serpent/events"
)

// ScheduleCommand is what an upstream system publishes on serp.cmd.schedule
// to order one observation: the slot it belongs to and the full search
// context. The same slot and context, published any number of times, is one
// job.
type ScheduleCommand struct {
	// Slot is the scheduled time of the observation (RFC 3339). The job
	// runs at the slot, or at once if the slot has passed.
	Slot     string `json:"slot"`
	Query    string `json:"query"`
	Country  string `json:"country"`
	Language string `json:"language"`
	Device   string `json:"device"`
	// Limit is the number of results, 1 to 100. Absent (nil, or JSON
	// null) means DefaultLimit; 0 is refused, not taken for the default.
	Limit *int `json:"limit,omitempty"`
	// Account names the API account to buy with; "" is the default.
	Account string `json:"account,omitempty"`
	// Priority is "high" or "normal" (the default).
	Priority string `json:"priority,omitempty"`
}

// LimitOf is a command's limit of n results; 0 is none given (the
// default).
func LimitOf(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// Command limits.
const (
	MaxQueryLen  = 2048
	DefaultLimit = 10
	MaxLimit     = 100
)

// FieldError is one problem with one field of a command.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists every problem of a command at once.
type ValidationError struct {
	Fields []FieldError `json:"fields"`
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Message
	}
	return "invalid schedule command: " + strings.Join(parts, "; ")
}

// Reason is a short token for the rejection subject serp.rejected.<reason>:
// invalid_<field> of the first problem.
func (e *ValidationError) Reason() string {
	if len(e.Fields) == 0 {
		return "invalid"
	}
	return "invalid_" + e.Fields[0].Field
}

// Canonical returns the command with its search context normalised (query
// whitespace collapsed, country upper case, language and device lower case,
// the default limit filled in, the slot in UTC), or every problem found.
func (c ScheduleCommand) Canonical() (ScheduleCommand, time.Time, error) {
	var errs []FieldError
	bad := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	slot, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(c.Slot))
	switch {
	case strings.TrimSpace(c.Slot) == "":
		bad("slot", "is required (RFC 3339 time, for example 2026-12-02T14:00:00Z)")
	case err != nil:
		bad("slot", "%s is not an RFC 3339 time such as 2026-12-02T14:00:00Z", quoted(c.Slot))
	case slot.UTC().Year() < 0 || slot.UTC().Year() > 9999:
		// Its canonical form in UTC would not be RFC 3339 (four-digit years).
		bad("slot", "%s falls outside the years 0000-9999 in UTC", quoted(c.Slot))
	case slot.IsZero():
		// Go's zero time stands for "no time" everywhere downstream.
		bad("slot", "%s is the zero time, not a slot", quoted(c.Slot))
	}
	c.Slot = slot.UTC().Format(time.RFC3339Nano)

	c.Query = strings.Join(strings.Fields(c.Query), " ")
	switch {
	case !utf8.ValidString(c.Query):
		bad("query", "is not valid UTF-8")
	case c.Query == "":
		bad("query", "is required")
	case len(c.Query) > MaxQueryLen:
		bad("query", "is %d bytes long, the limit is %d", len(c.Query), MaxQueryLen)
	}
	c.Country = strings.ToUpper(strings.TrimSpace(c.Country))
	switch {
	case c.Country == "":
		bad("country", "is required (a two-letter ISO 3166 country code such as US)")
	case !isLetters(c.Country, 2):
		bad("country", "%s is not a two-letter ISO 3166 country code such as US", quoted(c.Country))
	}
	c.Language = strings.ToLower(strings.TrimSpace(c.Language))
	switch {
	case c.Language == "":
		bad("language", "is required (a two-letter ISO 639-1 language code such as en)")
	case !isLetters(c.Language, 2):
		bad("language", "%s is not a two-letter ISO 639-1 language code such as en", quoted(c.Language))
	}
	c.Device = strings.ToLower(strings.TrimSpace(c.Device))
	switch {
	case c.Device == "":
		bad("device", "is required (desktop or mobile)")
	case c.Device != "desktop" && c.Device != "mobile":
		bad("device", "%s is not desktop or mobile", quoted(c.Device))
	}
	limit := DefaultLimit
	if c.Limit != nil {
		limit = *c.Limit
	}
	if limit < 1 || limit > MaxLimit {
		bad("limit", "%d is outside 1..%d (leave it out for %d)", limit, MaxLimit, DefaultLimit)
	}
	c.Limit = &limit
	c.Account = strings.TrimSpace(c.Account)
	if c.Account != "" && events.ValidateJobID(c.Account) != nil {
		bad("account", "%s is not a name of [a-z0-9_-], at most 64 characters", quoted(c.Account))
	}
	c.Priority = strings.ToLower(strings.TrimSpace(c.Priority))
	if c.Priority == "" {
		c.Priority = PriorityNormal
	}
	if c.Priority != PriorityNormal && c.Priority != PriorityHigh {
		bad("priority", "%s is not high or normal", quoted(c.Priority))
	}
	if len(errs) > 0 {
		return c, time.Time{}, &ValidationError{Fields: errs}
	}
	return c, slot.UTC(), nil
}

// quoted quotes a value for an error message, its first 64 bytes only: a
// message about a field never grows with the field.
func quoted(v string) string {
	const limit = 64
	if len(v) <= limit {
		return strconv.Quote(v)
	}
	return strconv.Quote(strings.ToValidUTF8(v[:limit], "")) + fmt.Sprintf("… (%d bytes)", len(v))
}

// Priorities of a job.
const (
	PriorityNormal = "normal"
	PriorityHigh   = "high"
)

// SearchContext is the command's search, as sent to the API.
func (c ScheduleCommand) SearchContext() events.SearchContext {
	limit := DefaultLimit
	if c.Limit != nil {
		limit = *c.Limit
	}
	return events.SearchContext{Query: c.Query, Country: c.Country, Language: c.Language, Device: c.Device, Limit: limit}
}

// NewSchedule validates a command and turns it into the Schedule input:
// the job id derived from the slot and the canonical search context, and the
// body bytes every key of the job will carry.
func NewSchedule(c ScheduleCommand, p events.RetryPolicy, source string) (Schedule, error) {
	c, slot, err := c.Canonical()
	if err != nil {
		return Schedule{}, err
	}
	search := c.SearchContext()
	body, err := Body(search)
	if err != nil {
		return Schedule{}, err
	}
	return Schedule{
		JobID: JobID(slot, body), Slot: slot, Search: search, Body: body, Policy: p,
		NotBefore: slot, Account: c.Account, Priority: c.Priority, Source: source,
	}, nil
}

// Body is the exact request body for a search context. Keys are written in
// a fixed order, so the same context always gives the same bytes.
func Body(sc events.SearchContext) (string, error) {
	b, err := json.Marshal(sc)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// JobID derives the id of the job for a slot and a canonical body: the
// first 128 bits of a SHA-256, in hex. It never changes for the same
// observation.
func JobID(slot time.Time, body string) string {
	h := sha256.New()
	h.Write([]byte("serpent/job/v1\n"))
	h.Write([]byte(slot.UTC().Format(time.RFC3339Nano)))
	h.Write([]byte{'\n'})
	h.Write([]byte(body))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// IsJobID reports whether id has the form JobID gives every job: 32
// lowercase hex characters.
func IsJobID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func isLetters(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
