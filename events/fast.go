package events

import "github.com/serpent-engine/serpent/internal/jsonraw"

// The fast path reads an event in one pass when it has the shape Encode
// writes: known members, each once, no null, the current schema. It is
// several times faster than encoding/json on the log (BenchmarkDecodeLog),
// which is what makes an audit or a rebuild of millions of events quick.
// Anything else, every error included, goes to decodeJSON, so an event is
// accepted, and read, exactly as encoding/json reads it.
// FuzzFastPathMatchesJSON holds the two paths to that.

// decodeFast reads b on the fast path; ok is false when it leaves b to
// decodeJSON. light drops an ObservationStored's result after checking
// it.
func decodeFast(b []byte, light bool) (e Event, ok bool) {
	s := &scan{Cursor: jsonraw.Cursor{B: b}, light: light}
	var (
		typ    string
		schema int
		data   []byte
		seen   once
	)
	ok = s.object(func(k []byte) bool {
		switch string(k) {
		case "type":
			return seen.first(0) && s.str(&typ)
		case "schema":
			return seen.first(1) && s.int(&schema)
		case "id":
			return seen.first(2) && s.str(&e.ID)
		case "job":
			return seen.first(3) && s.str(&e.JobID)
		case "version":
			return seen.first(4) && s.uint64(&e.Version)
		case "time":
			return seen.first(5) && s.time(&e.Time)
		case "data":
			if !seen.first(6) {
				return false
			}
			s.Space()
			if k, known := kinds[typ]; known && seen&1 != 0 {
				// Encode writes the type first: read the data in place.
				p, ok := k.scan(s)
				e.Data = p
				return ok
			}
			// The type comes later: keep the data for then.
			start := s.I
			if !s.Value() {
				return false
			}
			data = b[start:s.I]
			return true
		}
		return false
	})
	k, known := kinds[typ]
	if !ok || seen != 1<<7-1 || !s.Done() || !known || schema != k.schema {
		return Event{}, false
	}
	if e.Data == nil {
		ps := &scan{Cursor: jsonraw.Cursor{B: data}, light: light}
		p, ok := k.scan(ps)
		if !ok || !ps.Done() {
			return Event{}, false
		}
		e.Data = p
	}
	if e.Validate() != nil {
		return Event{}, false
	}
	return e, true
}
