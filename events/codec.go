package events

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// wire is the encoded shape of an event. Field names are part of the
// public format.
type wire struct {
	Type    string          `json:"type"`
	Schema  int             `json:"schema"`
	ID      string          `json:"id"`
	Job     string          `json:"job"`
	Version uint64          `json:"version"`
	Time    time.Time       `json:"time"`
	Data    json.RawMessage `json:"data"`
}

// Encode writes an event in its public JSON form after checking the
// envelope.
func Encode(e Event) ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, fmt.Errorf("events: cannot encode %s of job %s: %w", e.Type(), e.JobID, err)
	}
	data, err := marshalData(e.Data)
	if err != nil {
		return nil, fmt.Errorf("events: cannot encode %s of job %s: %w", e.Type(), e.JobID, err)
	}
	// The envelope without its data, then the data as marshalled: the
	// data is not scanned and compacted a second time.
	head, err := json.Marshal(wireHead{
		Type:    e.Type(),
		Schema:  e.Schema(),
		ID:      e.ID,
		Job:     e.JobID,
		Version: e.Version,
		Time:    e.Time.UTC(),
	})
	if err != nil {
		return nil, fmt.Errorf("events: cannot encode %s of job %s: %w", e.Type(), e.JobID, err)
	}
	out := make([]byte, 0, len(head)+len(data)+9)
	out = append(out, head[:len(head)-1]...)
	out = append(out, `,"data":`...)
	out = append(out, data...)
	return append(out, '}'), nil
}

// wireHead is wire without its data, in the same field order.
type wireHead struct {
	Type    string    `json:"type"`
	Schema  int       `json:"schema"`
	ID      string    `json:"id"`
	Job     string    `json:"job"`
	Version uint64    `json:"version"`
	Time    time.Time `json:"time"`
}

// Upcaster turns the data of one schema version into the data of the next.
type Upcaster func(data json.RawMessage) (json.RawMessage, error)

type upcastKey struct {
	typ  string
	from int
}

// Codec decodes events, bringing old schema versions up to date with its
// upcasters. The zero Codec has none, which is right while every type is at
// its first version.
type Codec struct {
	upcasters map[upcastKey]Upcaster
}

// Upcast registers fn to turn data of schema from into schema from+1 for a
// type. Registration is not safe for use concurrently with Decode; do it at
// start-up.
func (c *Codec) Upcast(typ string, from int, fn Upcaster) {
	if c.upcasters == nil {
		c.upcasters = make(map[upcastKey]Upcaster)
	}
	c.upcasters[upcastKey{typ, from}] = fn
}

// Decode reads an event with the zero Codec.
func Decode(b []byte) (Event, error) {
	var c Codec
	return c.Decode(b)
}

// DecodeLight is Decode for readers that never look at results, such as
// the audit: an ObservationStored's result is checked as strictly but not
// kept (it is nil), which spares copying and holding it.
func DecodeLight(b []byte) (Event, error) {
	if e, ok := decodeFast(b, true); ok {
		return e, nil
	}
	var c Codec
	e, err := c.decodeJSON(b)
	if o, ok := e.Data.(ObservationStored); ok {
		o.Result = nil
		e.Data = o
	}
	return e, err
}

// Decode reads one encoded event strictly: unknown types, newer schemas,
// unknown fields, trailing data and invalid envelopes are errors. An
// event as Encode writes it is read on the fast path (fast.go); anything
// else, and every error, by encoding/json with the upcasters.
func (c *Codec) Decode(b []byte) (Event, error) {
	if e, ok := decodeFast(b, false); ok {
		return e, nil
	}
	return c.decodeJSON(b)
}

// decodeJSON is Decode with encoding/json alone: the reference the fast
// path is held to.
func (c *Codec) decodeJSON(b []byte) (Event, error) {
	var w wire
	if err := strictUnmarshal(b, &w); err != nil {
		return Event{}, &DecodeError{Type: w.Type, Schema: w.Schema, JobID: w.Job, Err: errors.Join(ErrMalformed, err)}
	}
	fail := func(err error) (Event, error) {
		return Event{}, &DecodeError{Type: w.Type, Schema: w.Schema, JobID: w.Job, Err: err}
	}
	k, ok := kinds[w.Type]
	if !ok {
		return fail(fmt.Errorf("%w %q", ErrUnknownType, w.Type))
	}
	current := k.schema
	switch {
	case w.Schema > current:
		return fail(fmt.Errorf("%w: got %d, know up to %d", ErrNewerSchema, w.Schema, current))
	case w.Schema < 0:
		return fail(fmt.Errorf("%w: schema %d", ErrMalformed, w.Schema))
	}
	data := w.Data
	for v := w.Schema; v < current; v++ {
		up, ok := c.upcasters[upcastKey{w.Type, v}]
		if !ok {
			return fail(fmt.Errorf("%w: %s from schema %d", ErrMissingUpcast, w.Type, v))
		}
		var err error
		if data, err = up(data); err != nil {
			return fail(fmt.Errorf("upcast from schema %d: %w", v, err))
		}
	}
	if len(data) == 0 || string(data) == "null" {
		return fail(fmt.Errorf("%w: data is missing", ErrMalformed))
	}
	p, err := k.decode(data)
	if err != nil {
		return fail(errors.Join(ErrMalformed, err))
	}
	e := Event{ID: w.ID, JobID: w.Job, Version: w.Version, Time: w.Time, Data: p}
	if err := e.Validate(); err != nil {
		return fail(errors.Join(ErrMalformed, err))
	}
	return e, nil
}

func decodeAs[T Payload](data []byte) (Payload, error) {
	var v T
	if err := strictUnmarshal(data, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// strictUnmarshal decodes exactly one JSON value with no unknown fields.
func strictUnmarshal(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the event")
	}
	return nil
}
