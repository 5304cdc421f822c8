package events

import (
	"errors"
	"fmt"

	"github.com/serpent-engine/serpent/internal/jsonraw"
)

// A message of the log holds one event, an object as Encode writes it, or
// the events of one append written together: a JSON array of two or more
// of them, in order, all of one job at consecutive versions. The store
// writes an append of several events as one such message when it fits,
// and as one message per event in an atomic batch when it does not, so a
// log may hold both; readers take every message with DecodeAll (or Split).

// Group joins encoded events (Encode's output, in order) into the body of
// one message. One event is its own body.
func Group(encoded [][]byte) []byte {
	if len(encoded) == 1 {
		return encoded[0]
	}
	n := 1
	for _, b := range encoded {
		n += len(b) + 1
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, b := range encoded {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return append(out, ']')
}

// Split returns the encoded events a message body holds: the body itself
// when it is not an array (one event, for Decode to judge), the elements
// of an array otherwise. An array that is not valid JSON, or holds fewer
// than two elements, is an error.
func Split(b []byte) ([][]byte, error) {
	c := jsonraw.Cursor{B: b}
	if c.Peek() != '[' {
		return [][]byte{b}, nil
	}
	c.I++
	var out [][]byte
	for {
		c.Space()
		start := c.I
		if !c.Value() {
			return nil, errors.New("events: a group of events is not a valid JSON array")
		}
		out = append(out, b[start:c.I])
		if c.Lit(',') {
			continue
		}
		if c.Lit(']') && c.Done() {
			break
		}
		return nil, errors.New("events: a group of events is not a valid JSON array")
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("events: a group of events holds %d, a group is two or more", len(out))
	}
	return out, nil
}

// DecodeAll reads every event of a message body with Decode. The events
// of a group must belong to one job at consecutive versions.
func DecodeAll(b []byte) ([]Event, error) { return decodeAll(b, Decode) }

// DecodeAllLight is DecodeAll with DecodeLight: results are left out.
func DecodeAllLight(b []byte) ([]Event, error) { return decodeAll(b, DecodeLight) }

func decodeAll(b []byte, decode func([]byte) (Event, error)) ([]Event, error) {
	parts, err := Split(b)
	if err != nil {
		return nil, err
	}
	evs := make([]Event, 0, len(parts))
	for i, p := range parts {
		e, err := decode(p)
		if err != nil {
			if len(parts) > 1 {
				return nil, fmt.Errorf("event %d of the group: %w", i+1, err)
			}
			return nil, err
		}
		if i > 0 {
			if prev := evs[i-1]; e.JobID != prev.JobID || e.Version != prev.Version+1 {
				return nil, fmt.Errorf("events: a group holds %s %s of job %s at version %d after %s of job %s at version %d",
					e.Type(), e.ID, e.JobID, e.Version, prev.Type(), prev.JobID, prev.Version)
			}
		}
		evs = append(evs, e)
	}
	return evs, nil
}

// DecodeLast reads a message body strictly (DecodeAll) and returns its
// last event: what a job's last message leaves it at.
func DecodeLast(b []byte) (Event, error) {
	evs, err := DecodeAll(b)
	if err != nil {
		return Event{}, err
	}
	return evs[len(evs)-1], nil
}
