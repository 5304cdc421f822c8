package projections

import (
	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/internal/jsonraw"
)

// Decode reads one encoded event exactly as events.Decode does, several
// times faster on events as serpent writes them, which is what makes an
// audit or a rebuild of millions of events quick. A single-pass reader
// takes the shape the codec writes (known members, each once, no null);
// anything else, every error included, is handed to events.Decode, so an
// event is accepted, and read, exactly as the strict codec would. A
// differential fuzz test (FuzzDecodeMatchesCodec) holds it to that.
func Decode(b []byte) (events.Event, error) {
	if e, ok := fastDecode(b, false); ok {
		return e, nil
	}
	return events.Decode(b)
}

// DecodeLight is Decode for readers that never look at results, such as
// the audit: an ObservationStored's result is checked as strictly but not
// kept (it is nil), which spares copying and holding it.
func DecodeLight(b []byte) (events.Event, error) {
	if e, ok := fastDecode(b, true); ok {
		return e, nil
	}
	e, err := events.Decode(b)
	if o, ok := e.Data.(events.ObservationStored); ok {
		o.Result = nil
		e.Data = o
	}
	return e, err
}

// DecodeAll reads the events of one message of the log, one or a group
// (events.DecodeAll), with Decode, or DecodeLight when light.
func DecodeAll(b []byte, light bool) ([]events.Event, error) {
	if light {
		return events.DecodeAllWith(b, DecodeLight)
	}
	return events.DecodeAllWith(b, Decode)
}

func fastDecode(b []byte, light bool) (events.Event, bool) {
	s := &scan{Cursor: jsonraw.Cursor{B: b}, light: light}
	var (
		e      events.Event
		typ    string
		schema int
		data   []byte
		seen   once
	)
	ok := s.object(func(k []byte) bool {
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
			if decode, known := payloads[typ]; known && seen&1 != 0 {
				// The codec writes the type first: read the data in place.
				p, ok := decode(s)
				e.Data = p
				return ok
			}
			start := s.I
			if !s.skip() {
				return false
			}
			data = b[start:s.I]
			return true
		}
		return false
	})
	if !ok || seen != 1<<7-1 || !s.Done() || schema != events.CurrentSchema(typ) {
		return events.Event{}, false
	}
	if e.Data == nil {
		decode, known := payloads[typ]
		if !known {
			return events.Event{}, false
		}
		ps := &scan{Cursor: jsonraw.Cursor{B: data}, light: light}
		p, ok := decode(ps)
		if !ok || !ps.Done() {
			return events.Event{}, false
		}
		e.Data = p
	}
	if e.Validate() != nil {
		return events.Event{}, false
	}
	return e, true
}

// payloads reads the data of each event type at its current schema. A
// type missing here, or a schema this file does not know, goes to
// events.Decode.
var payloads = map[string]func(s *scan) (events.Payload, bool){
	events.TypeJobScheduled:         decodeJobScheduled,
	events.TypeAttemptCreated:       decodeAttemptCreated,
	events.TypeSent:                 decodeSent,
	events.TypeOutcomeClassified:    decodeOutcomeClassified,
	events.TypeKeyRotated:           decodeKeyRotated,
	events.TypeDeadlineReached:      decodeDeadlineReached,
	events.TypeReconciled:           decodeReconciled,
	events.TypeObservationStored:    decodeObservationStored,
	events.TypeJobFailed:            decodeJobFailed,
	events.TypeJobCancelled:         decodeJobCancelled,
	events.TypeRepurchaseAuthorized: decodeRepurchaseAuthorized,
}
