package events

import (
	"fmt"
	"strconv"
	"strings"
)

// Header names of a message of the log. The event id is the message id,
// on which JetStream drops a retried append; the first message of an
// append carries the version it expects, which JetStream checks. The type
// and schema headers repeat what the body holds, so consumers can filter
// without decoding it.
const (
	HeaderMsgID       = "Nats-Msg-Id"
	HeaderExpectedSeq = "Nats-Expected-Last-Subject-Sequence"
	HeaderType        = "Serpent-Event-Type"
	HeaderSchema      = "Serpent-Event-Schema"
)

// headerSep separates the values of a group's HeaderType and HeaderSchema,
// one for each event, in order.
const headerSep = ","

// Header is the header of a message holding evs (one, or a group) as the
// store writes it: the first event's id as message id, the events' types
// and schemas. The expected version is the store's to add.
func Header(evs ...Event) map[string][]string {
	schemas := make([]string, len(evs))
	for i, e := range evs {
		schemas[i] = strconv.Itoa(e.Schema())
	}
	return map[string][]string{
		HeaderMsgID:  {evs[0].ID},
		HeaderType:   {TypeHeader(evs)},
		HeaderSchema: {strings.Join(schemas, headerSep)},
	}
}

// JoinHeaders is the header of one message that holds, in order, the
// events of messages with headers hs, as Group joins their bodies: the
// first's message id and expected version, every type and schema.
func JoinHeaders(hs []map[string][]string) map[string][]string {
	types := make([]string, len(hs))
	schemas := make([]string, len(hs))
	for i, h := range hs {
		types[i], schemas[i] = first(h, HeaderType), first(h, HeaderSchema)
	}
	out := map[string][]string{
		HeaderMsgID:  {first(hs[0], HeaderMsgID)},
		HeaderType:   {strings.Join(types, headerSep)},
		HeaderSchema: {strings.Join(schemas, headerSep)},
	}
	if v, ok := hs[0][HeaderExpectedSeq]; ok {
		out[HeaderExpectedSeq] = v
	}
	return out
}

// CheckHeader checks the events of one message (at least one) against
// its header: the message id is the first event's, the type header names
// the events' types. Absent headers are not checked.
func CheckHeader(header map[string][]string, evs []Event) error {
	e := evs[0]
	if v := first(header, HeaderMsgID); v != "" && v != e.ID {
		return fmt.Errorf("event id %s is stored under message id %q", e.ID, v)
	}
	if v := first(header, HeaderType); v != "" && v != TypeHeader(evs) {
		if len(evs) == 1 {
			return fmt.Errorf("%s event %s is stored with type header %q", e.Type(), e.ID, v)
		}
		return fmt.Errorf("a group of %s events from %s is stored with type header %q", TypeHeader(evs), e.ID, v)
	}
	return nil
}

// HeaderEvents is how many events a HeaderType value names.
func HeaderEvents(header string) int { return strings.Count(header, headerSep) + 1 }

// LastType is the type of the last event a HeaderType value names.
func LastType(header string) string {
	if i := strings.LastIndex(header, headerSep); i >= 0 {
		return header[i+len(headerSep):]
	}
	return header
}

// TypeHeader is the HeaderType value of a message holding evs.
func TypeHeader(evs []Event) string {
	types := make([]string, len(evs))
	for i, e := range evs {
		types[i] = e.Type()
	}
	return strings.Join(types, headerSep)
}

func first(h map[string][]string, k string) string {
	if vs := h[k]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}
